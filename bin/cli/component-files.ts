import { existsSync, statSync } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import { isRelativeImport } from "#adapters/component-tree";
import { importCandidates } from "#core/component-files";
import { importSpecifiers } from "#core/import-specifiers";
import { CliError } from "./errors.ts";

/**
 * A component read from disk as the API takes it: one file as `component_code`, or the entry and
 * the sibling files it imports as `component_files` with `component_entry`.
 */
export interface ComponentBody {
  body: { component_code: string } | { component_files: Record<string, string>; component_entry: string };
  /** Every file read, absolute (what `sluice dev` watches). */
  read: string[];
  /** The folder the file names of `component_files` are relative to. */
  root: string;
}

/** Bounds of what one deploy reads (the API takes a request body of 1 MiB). */
export const COMPONENT_LIMITS = { files: 200, totalBytes: 1024 * 1024, depth: 32 };

/**
 * The relative specifiers a module's text imports (`./`, `../`), found by the scanner the server
 * uses on a `component_url` or a registry directory (static, `export ... from`, bare, dynamic and
 * `require` imports with a literal, outside comments and strings), so that a deploy sends the
 * files the server would gather itself. Packages (bare names) are the server's to install.
 */
export function relativeImports(text: string): string[] {
  return [...new Set(importSpecifiers(text).filter(isRelativeImport))];
}

/**
 * The folder a component's files are read from and named relative to: `root` when given, else the
 * nearest folder above the entry holding `.git` or `package.json` (a checkout of the registry, a
 * project), else the entry's own folder. Nothing outside it is ever read.
 */
export function componentRoot(entry: string, root?: string): string {
  if (root !== undefined) return resolve(root);
  const start = dirname(resolve(entry));
  for (const marker of [".git", "package.json"])
    for (let dir = start; ; dir = dirname(dir)) {
      if (existsSync(join(dir, marker))) return dir;
      if (dirname(dir) === dir) break;
    }
  return start;
}

const inside = (root: string, path: string) => path === root || path.startsWith(root + sep);
const posix = (path: string) => path.split(sep).join("/");

/**
 * Reads `entry` and, transitively, the files it imports relatively, within `root` (see
 * {@link componentRoot}) and {@link COMPONENT_LIMITS}. Refuses an import that leaves the root, a
 * symbolic link that points out of it, a file that is missing or not a regular file.
 */
export async function readComponent(entry: string, options: { root?: string } = {}): Promise<ComponentBody> {
  const root = await realpath(componentRoot(entry, options.root)).catch(() => {
    throw new CliError(`${options.root} does not exist`);
  });
  const entryPath = resolve(entry);
  const files = new Map<string, string>();
  let total = 0;

  const name = (path: string) => posix(relative(root, path));
  async function load(path: string, importer: { path: string; specifier: string } | undefined, depth: number) {
    const shown = importer === undefined ? entry : `${name(importer.path)} imports ${importer.specifier}:`;
    if (!inside(root, path)) throw new CliError(`${shown} outside ${root}, the component's folder tree (see --root)`);
    let real: string;
    try {
      real = await realpath(path);
    } catch {
      throw new CliError(`${shown} no such file`);
    }
    if (!inside(root, real)) throw new CliError(`${shown} a link to ${real}, outside ${root}`);
    const key = name(real);
    if (files.has(key)) return key;
    if (depth > COMPONENT_LIMITS.depth)
      throw new CliError(`${shown} imports nest deeper than ${COMPONENT_LIMITS.depth}`);
    const info = await stat(real);
    if (!info.isFile()) throw new CliError(`${shown} not a file`);
    if (files.size >= COMPONENT_LIMITS.files)
      throw new CliError(`the component imports more than ${COMPONENT_LIMITS.files} files`);
    total += info.size;
    if (total > COMPONENT_LIMITS.totalBytes)
      throw new CliError(`the component's files come to more than ${COMPONENT_LIMITS.totalBytes} bytes`);
    const text = await readFile(real, "utf8");
    files.set(key, text);
    if (!real.endsWith(".json"))
      for (const specifier of relativeImports(text))
        await load(resolveImport(root, real, specifier), { path: real, specifier }, depth + 1);
    return key;
  }

  const entryKey = await load(entryPath, undefined, 0);
  const read = [...files.keys()].map((key) => join(root, key));
  if (files.size === 1) return { body: { component_code: files.get(entryKey) ?? "" }, read, root };
  return { body: { component_files: Object.fromEntries(files), component_entry: entryKey }, read, root };
}

/**
 * The file an import of `importer` (below `root`) names: the first of the server's candidates
 * (`importCandidates`: as written, with an implied extension, `x.ts` for `x.js`, a folder's
 * `index`) that is a file on disk, else the path as written, which is then reported missing. An
 * import that climbs above `root` resolves to where it leads, which is then refused as outside.
 */
function resolveImport(root: string, importer: string, specifier: string): string {
  const base = resolve(dirname(importer), specifier);
  const candidates = importCandidates(posix(relative(root, importer)), specifier);
  if ("refused" in candidates) return base;
  const found = candidates.paths
    .map((path) => join(root, ...path.split("/")))
    .find((candidate) => existsSync(candidate) && !statSync(candidate).isDirectory());
  return found ?? base;
}
