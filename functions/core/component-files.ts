/**
 * Multi-file components (issue 15): a component brought as several files, an entry that imports
 * its siblings by relative path (`import http from "../../http.app.mjs"`), as the public
 * registry's components are written. Given as `component_files` (relative path -> text) with
 * `component_entry`, or found by following the relative imports of a `component_url`.
 *
 * Such a component is kept as ONE text, its "packed" form: a marker line, then the files as
 * canonical JSON (paths sorted). Everything that handles component code (the stores, the hosts,
 * a workflow's modules by code hash, content-addressed bundles) then works unchanged, and
 * `code_hash`, the hash of that text, covers every file. Only the bundler
 * (`#adapters/component-build`) unpacks it, and resolves relative imports among these files only.
 * Packed text a client sends as `component_code` is held to the same bounds when it is unpacked.
 */

import { DomainError } from "./errors.ts";

/** A component as files: paths are relative, `/`-separated, normalised (no `.`, `..`, empty segment). */
export interface ComponentFiles {
  /** The path of the entry module, one of `files`' keys. */
  readonly entry: string;
  readonly files: Readonly<Record<string, string>>;
}

/** At most this many files in one component (a registry source with its app and `common/` uses a few dozen). */
export const MAX_COMPONENT_FILES = 200;
/** At most this many UTF-8 bytes of file contents in all, the API's own body limit. */
export const MAX_COMPONENT_FILES_BYTES = 1024 * 1024;
/** At most this many characters in one path. */
export const MAX_COMPONENT_PATH_LENGTH = 256;
/** At most this many folders deep (`a/b/c.mjs` is 3 segments). */
export const MAX_COMPONENT_PATH_SEGMENTS = 16;

/** The file kinds a component may consist of: JavaScript (ESM or CommonJS), TypeScript, JSON. */
export const COMPONENT_FILE_EXTENSIONS = [".mjs", ".js", ".cjs", ".ts", ".mts", ".cts", ".json"] as const;

/** First line of the packed form; no JavaScript module starts with it by accident. */
const PACKED_MARKER = "//sluice:component-files v1\n";

const FILES_FIELD = "component_files";
const ENTRY_FIELD = "component_entry";

const refused = (field: string, message: string) =>
  new DomainError("validation", `${field}: ${message}`, [{ field, message }]);

/**
 * A path as the client wrote it, made canonical: `\` read as `/`, `./` and empty segments
 * dropped. Refused: absolute paths (`/x`, `C:/x`, `//host/x`), URLs, `..`, NUL and control
 * characters, paths too long or too deep, and names of kinds a component cannot hold.
 * @returns the canonical path, or why it is refused
 */
export function normaliseComponentPath(path: string): { path: string } | { refused: string } {
  if (path.length === 0) return { refused: "is empty" };
  if (path.length > MAX_COMPONENT_PATH_LENGTH)
    return { refused: `is longer than ${MAX_COMPONENT_PATH_LENGTH} characters` };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
  if (/[\u0000-\u001f\u007f]/.test(path)) return { refused: "contains a control character" };
  const slashed = path.replace(/\\/g, "/");
  if (slashed.startsWith("/") || /^[a-zA-Z]:/.test(slashed) || /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(slashed)) {
    return { refused: "must be a relative path" };
  }
  const segments = slashed.split("/").filter((segment) => segment !== "" && segment !== ".");
  if (segments.includes("..")) return { refused: 'must not contain ".."' };
  if (segments.length === 0) return { refused: "names no file" };
  if (segments.length > MAX_COMPONENT_PATH_SEGMENTS) {
    return { refused: `is more than ${MAX_COMPONENT_PATH_SEGMENTS} folders deep` };
  }
  const canonical = segments.join("/");
  if (!COMPONENT_FILE_EXTENSIONS.some((extension) => canonical.endsWith(extension))) {
    return { refused: `must end in one of ${COMPONENT_FILE_EXTENSIONS.join(", ")}` };
  }
  return { path: canonical };
}

/**
 * The files of a request (`component_files`, `component_entry`), checked and made canonical.
 * @throws DomainError `validation` on the field at fault, naming the path
 */
export function componentFilesOf(files: Readonly<Record<string, unknown>>, entry: string | undefined): ComponentFiles {
  const paths = Object.keys(files);
  if (paths.length === 0) throw refused(FILES_FIELD, "must hold at least one file");
  if (paths.length > MAX_COMPONENT_FILES) throw refused(FILES_FIELD, `must hold at most ${MAX_COMPONENT_FILES} files`);
  const canonical: Record<string, string> = {};
  let bytes = 0;
  for (const given of paths) {
    const normal = normaliseComponentPath(given);
    if ("refused" in normal) throw refused(FILES_FIELD, `path ${JSON.stringify(given)} ${normal.refused}`);
    const text = files[given];
    if (typeof text !== "string") throw refused(FILES_FIELD, `file ${JSON.stringify(given)} must be a string`);
    if (Object.hasOwn(canonical, normal.path)) {
      throw refused(FILES_FIELD, `paths ${JSON.stringify(given)} and another name the same file ${normal.path}`);
    }
    bytes += Buffer.byteLength(text, "utf8");
    if (bytes > MAX_COMPONENT_FILES_BYTES) {
      throw refused(FILES_FIELD, `the files hold more than ${MAX_COMPONENT_FILES_BYTES} bytes in all`);
    }
    canonical[normal.path] = text;
  }
  const entryPath = entryOf(Object.keys(canonical), entry);
  if (canonical[entryPath]?.trim() === "") throw refused(FILES_FIELD, `the entry ${entryPath} is empty`);
  return { entry: entryPath, files: canonical };
}

/** The entry: as given (canonical), or the only file when there is one. */
function entryOf(paths: readonly string[], entry: string | undefined): string {
  if (entry === undefined) {
    if (paths.length === 1) return paths[0] as string;
    throw refused(ENTRY_FIELD, "is required when component_files holds more than one file");
  }
  const normal = normaliseComponentPath(entry);
  if ("refused" in normal) throw refused(ENTRY_FIELD, normal.refused);
  if (!paths.includes(normal.path)) throw refused(ENTRY_FIELD, `names ${normal.path}, which is not in component_files`);
  return normal.path;
}

/** The packed text of `component` (see the file header): canonical, so equal files give equal text and hash. */
export function packComponentFiles(component: ComponentFiles): string {
  const files: Record<string, string> = {};
  for (const path of Object.keys(component.files).sort()) files[path] = component.files[path] as string;
  return `${PACKED_MARKER}${JSON.stringify({ entry: component.entry, files })}`;
}

/** Whether `code` is a packed multi-file component. */
export const isPackedComponent = (code: string) => code.startsWith(PACKED_MARKER);

/**
 * The files of a packed component, checked again (the text may have come from a client as
 * `component_code`), or undefined when `code` is a single module.
 * @throws DomainError `validation` on `component_code` when the packed text is malformed
 */
export function unpackComponentFiles(code: string): ComponentFiles | undefined {
  if (!isPackedComponent(code)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(code.slice(PACKED_MARKER.length));
  } catch {
    throw refused("component_code", "starts with the marker of packed component files but is not their JSON");
  }
  const { entry, files } = (parsed ?? {}) as { entry?: unknown; files?: unknown };
  if (typeof entry !== "string" || typeof files !== "object" || files === null || Array.isArray(files)) {
    throw refused("component_code", "packed component files need an entry and an object of files");
  }
  return componentFilesOf(files as Record<string, unknown>, entry);
}

/** The files of stored code for a view: undefined for a single module (or packed text that never built). */
export function storedComponentFiles(code: string): ComponentFiles | undefined {
  try {
    return unpackComponentFiles(code);
  } catch {
    return undefined;
  }
}

/** What a client reads as `code`: a single module as it is, a multi-file component's entry file. */
export function entryCode(code: string): string {
  const component = storedComponentFiles(code);
  return component ? (component.files[component.entry] as string) : code;
}

/**
 * The code of a component found by following a URL's imports: a single file's text when it
 * imports no sibling (stored exactly as before multi-file components existed), else packed.
 */
export const fetchedComponentCode = (component: ComponentFiles): string =>
  Object.keys(component.files).length === 1
    ? (component.files[component.entry] as string)
    : packComponentFiles(component);

/** What an import without an extension may name, in this order (the registry's own is `.mjs`). */
const IMPLIED_EXTENSIONS = [".mjs", ".js", ".cjs", ".ts", ".mts", ".cts", ".json"];
/** TypeScript's ESM convention: `./x.js` in a `.ts` file means `./x.ts`. */
const TYPESCRIPT_FOR: Readonly<Record<string, string>> = { ".js": ".ts", ".mjs": ".mts", ".cjs": ".cts" };

/**
 * The files a relative import of `importer` may name, in the order they are tried: the path as
 * written, with an implied extension, a TypeScript file for a `.js` one, a folder's `index`. Only
 * paths a component may hold ({@link normaliseComponentPath}). The bundler takes the first that is
 * among the files; a `component_url` fetches them in this order until one exists, so both agree.
 * Refused: anything but `./` and `../` imports, and one that leads above the files' root.
 */
export function importCandidates(importer: string, specifier: string): { paths: string[] } | { refused: string } {
  if (!specifier.startsWith("./") && !specifier.startsWith("../") && specifier !== "." && specifier !== "..") {
    return { refused: "only relative imports (./ or ../) may name a component's own files" };
  }
  const base = joinBelow(importer, specifier);
  if (base === undefined) return { refused: "it leads out of the component's files" };
  const candidates = base === "" ? [] : [base, ...IMPLIED_EXTENSIONS.map((extension) => `${base}${extension}`)];
  const extension = /\.[^./]*$/.exec(base)?.[0] ?? "";
  const typescript = TYPESCRIPT_FOR[extension];
  if (typescript) candidates.push(`${base.slice(0, -extension.length)}${typescript}`);
  candidates.push(...IMPLIED_EXTENSIONS.map((implied) => `${base === "" ? "" : `${base}/`}index${implied}`));
  const paths = candidates.filter((candidate) => {
    const normal = normaliseComponentPath(candidate);
    return "path" in normal && normal.path === candidate;
  });
  return { paths: [...new Set(paths)] };
}

/** `specifier` resolved against the folder of `importer`, or undefined when it climbs above the root. */
function joinBelow(importer: string, specifier: string): string | undefined {
  const segments = importer.split("/").slice(0, -1);
  for (const part of specifier.replace(/\\/g, "/").split("/")) {
    if (part === "" || part === ".") continue;
    if (part !== "..") segments.push(part);
    else if (segments.pop() === undefined) return undefined;
  }
  return segments.join("/");
}
