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
 * - Each file is fetched once, in the bundler's order of places, a 404 meaning "not here", within
 *   bounds (`component-tree.ts`).
 */
import { type ComponentFiles, normaliseComponentPath } from "#core/component-files";
import { DomainError } from "#core/errors";
import { collectComponentFiles, type TreeBounds } from "./component-tree.ts";

const FIELD = "component_url";

/** A validation error on `component_url`. */
export const componentUrlError = (message: string) =>
  new DomainError("validation", `${FIELD}: ${message}`, [{ field: FIELD, message }]);

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
  const urlOf = (path: string) => new URL(`${root}${path.split("/").map(encodeURIComponent).join("/")}`, entry.origin);
  return collectComponentFiles(entryPath, entryText, bounds, {
    read: (path, maxBytes) => fetchFile(urlOf(path), maxBytes),
    refused: componentUrlError,
    nowhere: `below ${entry.origin}${root}`,
  });
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
