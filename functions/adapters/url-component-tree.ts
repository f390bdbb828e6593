/**
 * The files a `component_url` brings (issue 15): the file at the URL and, transitively, every
 * file it imports by relative path, fetched against the URL as a browser resolves module URLs.
 *
 * - The tree's root is the URL's first path component (`/components/` of
 *   `http://host/components/http/sources/new-requests/new-requests.mjs`), or the repository's root
 *   for raw.githubusercontent.com (`/<owner>/<repo>/<ref>/`). No import may lead above it, and
 *   files are named by their path below it (`http/http.app.mjs`).
 * - Only the same origin is fetched, through every redirect (the caller's `fetchFile` enforces
 *   redirects; this module only ever builds same-origin URLs).
 * - Each file is fetched once; an import without an extension tries the places the bundler would
 *   take, in its order (`importCandidates`), a 404 meaning "not here".
 * - Bounded: files, bytes in all, depth of the import chain, requests (misses included) and time.
 */
import { type ComponentFiles, importCandidates, normaliseComponentPath } from "#core/component-files";
import { DomainError } from "#core/errors";
import { importSpecifiers } from "#core/import-specifiers";

const FIELD = "component_url";

/** A validation error on `component_url`. */
export const componentUrlError = (message: string) =>
  new DomainError("validation", `${FIELD}: ${message}`, [{ field: FIELD, message }]);

export interface TreeBounds {
  /** Most files in the component, the entry included. */
  readonly maxFiles: number;
  /** Most bytes of all files together. */
  readonly maxBytes: number;
  /** Longest chain of imports from the entry (the entry's own imports are depth 1). */
  readonly maxDepth: number;
  /** Most requests, the ones that found nothing included. */
  readonly maxRequests: number;
  /** Longest time for the whole tree. */
  readonly deadlineMs: number;
}

/** `./x` and `../x`: the imports that name a sibling file. */
export const isRelativeImport = (specifier: string) => specifier.startsWith("./") || specifier.startsWith("../");

/**
 * The URL to fetch for a URL a user gives: a GitHub file page
 * (`https://github.com/<owner>/<repo>/blob/<ref>/<path>`) is read as its raw file; any other as it is.
 */
export function rawFileUrl(url: URL): URL {
  const segments = url.pathname.split("/");
  if (url.hostname !== "github.com" || segments[3] !== "blob" || segments.length < 6) return url;
  const [, owner, repo, , ...rest] = segments;
  return new URL(`https://raw.githubusercontent.com/${owner}/${repo}/${rest.join("/")}`);
}

/** The root path of the tree `url` is in (see the file header), ending in `/`. */
export function treeRoot(url: URL): string {
  const segments = url.pathname.split("/").slice(1, -1);
  const kept = url.hostname === "raw.githubusercontent.com" ? 3 : 1;
  return segments.length >= kept ? `/${segments.slice(0, kept).join("/")}/` : "/";
}

/**
 * The component at `entry` with every file it imports by relative path (see the file header).
 * `fetchFile` answers a file's text, undefined when there is none (404), and throws for anything
 * else; it is given the bytes still allowed.
 *
 * @throws DomainError `validation` on `component_url` naming the file, the import and the bound
 */
export async function fetchComponentTree(
  entry: URL,
  entryText: string,
  bounds: TreeBounds,
  fetchFile: (url: URL, maxBytes: number) => Promise<string | undefined>,
): Promise<ComponentFiles> {
  const root = treeRoot(entry);
  const entryPath = pathBelow(root, entry);
  const normal = normaliseComponentPath(entryPath);
  if ("refused" in normal || normal.path !== entryPath) {
    throw componentUrlError(
      `the file imports others, so its URL must name a file of a component (.mjs, .js, .cjs, .ts or .json) below ${root}`,
    );
  }
  const deadline = Date.now() + bounds.deadlineMs;
  const files: Record<string, string> = { [entryPath]: entryText };
  let bytes = Buffer.byteLength(entryText, "utf8");
  let requests = 1;
  const missing = new Set<string>();
  const urlOf = (path: string) => new URL(`${root}${path.split("/").map(encodeURIComponent).join("/")}`, entry.origin);
  const queue: { path: string; depth: number }[] = [{ path: entryPath, depth: 0 }];

  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const { path, depth } = next;
    const text = files[path] as string;
    // JSON imports nothing.
    if (path.endsWith(".json")) continue;
    for (const specifier of importSpecifiers(text).filter(isRelativeImport)) {
      const cannot = (why: string) => componentUrlError(`${path}: cannot import ${JSON.stringify(specifier)}: ${why}`);
      const candidates = importCandidates(path, specifier);
      if ("refused" in candidates) throw cannot(candidates.refused);
      if (candidates.paths.some((candidate) => Object.hasOwn(files, candidate))) continue;
      let found: string | undefined;
      for (const candidate of candidates.paths) {
        if (missing.has(candidate)) continue;
        if (depth + 1 > bounds.maxDepth) throw cannot(`imports are more than ${bounds.maxDepth} deep`);
        if (++requests > bounds.maxRequests)
          throw cannot(`finding the files took more than ${bounds.maxRequests} requests`);
        if (Date.now() > deadline) throw cannot(`fetching the files took more than ${bounds.deadlineMs / 1000}s`);
        const fetched = await fetchFile(urlOf(candidate), bounds.maxBytes - bytes);
        if (fetched === undefined) {
          missing.add(candidate);
          continue;
        }
        found = candidate;
        bytes += Buffer.byteLength(fetched, "utf8");
        if (bytes > bounds.maxBytes) throw cannot(`the files hold more than ${bounds.maxBytes} bytes in all`);
        files[candidate] = fetched;
        if (Object.keys(files).length > bounds.maxFiles)
          throw cannot(`the component has more than ${bounds.maxFiles} files`);
        queue.push({ path: candidate, depth: depth + 1 });
        break;
      }
      if (found === undefined) throw cannot(`no file found for it below ${entry.origin}${root}`);
    }
  }
  return { entry: entryPath, files };
}

/** `url`'s path below `root`, its segments decoded. */
function pathBelow(root: string, url: URL): string {
  const below = url.pathname.slice(root.length);
  try {
    return below.split("/").map(decodeURIComponent).join("/");
  } catch {
    throw componentUrlError("its path is not valid percent-encoding");
  }
}
