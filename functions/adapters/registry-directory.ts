/**
 * A components tree in the public registry's layout (`SLUICE_REGISTRY_DIR`, issue 15): a checkout
 * of its `components/` folder, a folder holding one (`<dir>/components/`), or installed
 * `@pipedream/<app>` packages (`node_modules/@pipedream/`). Every `<app>/sources/<name>/<name>.*`
 * and `<app>/actions/<name>/<name>.*` whose code declares a `key` is served by that key, with the
 * files it imports by relative path (`../../<app>.app.mjs`, `../common/base.mjs`, another app's
 * file) read from the tree, never from above its root, bounded as a `component_url` is.
 *
 * Keys are read from the files' text (`key: "http-new-requests"`, the registry's first key
 * literal), once, on first use: a component added later is served after a restart; a changed file
 * is read again at each request (and is a new component by its code hash).
 */
import type { Dirent } from "node:fs";
import { readdir, readFile, realpath, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { fetchedComponentCode, MAX_COMPONENT_FILES, MAX_COMPONENT_FILES_BYTES } from "#core/component-files";
import { DomainError } from "#core/errors";
import type { ComponentRegistry } from "#core/ports/component-registry";
import { collectComponentFiles, type TreeBounds } from "./component-tree.ts";

/** Which file of a component's folder is its entry, when several are (`x.mjs` beside its `x.ts` source). */
const ENTRY_EXTENSIONS = [".mjs", ".js", ".cjs", ".ts", ".mts", ".cts"];
const KINDS = ["sources", "actions"];
/** The first key literal of a registry component: `key: "app-name"`. */
const KEY = /\bkey\s*:\s*["'`]([a-z0-9][a-z0-9_.-]{0,99})["'`]/;

const BOUNDS: TreeBounds = {
  maxFiles: MAX_COMPONENT_FILES,
  maxBytes: MAX_COMPONENT_FILES_BYTES,
  maxDepth: 16,
  maxRequests: 400,
  deadlineMs: 60_000,
};

/** The registry of `dir` (see the file header); templates, and keys it lacks, come from `fallback`. */
export function registryDirectory(dir: string, fallback: ComponentRegistry): ComponentRegistry {
  let index: Promise<{ root: string; entries: Map<string, string> }> | undefined;
  const indexed = () => {
    if (!index) {
      index = indexTree(dir);
      index.catch(() => {
        index = undefined;
      });
    }
    return index;
  };
  return {
    async readCode(key) {
      const { root, entries } = await indexed();
      const entry = entries.get(key);
      if (entry === undefined) return fallback.readCode(key);
      const text = await readInside(root, entry);
      if (text === undefined) return fallback.readCode(key);
      const refused = (message: string) =>
        new DomainError("validation", `key: registry component ${key}: ${message}`, [
          { field: "key", message: `registry component ${key}: ${message}` },
        ]);
      const component = await collectComponentFiles(entry, text, BOUNDS, {
        read: (path, maxBytes) =>
          readInside(root, path, maxBytes).catch((error: unknown) => {
            throw error instanceof FileTooLargeError ? refused(error.message) : error;
          }),
        refused,
        nowhere: "in the registry directory",
      });
      return fetchedComponentCode(component);
    },
    readTemplate: (id) => fallback.readTemplate(id),
  };
}

/** The apps' folder of `dir` (its `components/` when it has one) and every component's entry by key. */
async function indexTree(dir: string): Promise<{ root: string; entries: Map<string, string> }> {
  const nested = join(dir, "components");
  const root = await realpath((await isFolder(nested)) ? nested : dir);
  const entries = new Map<string, string>();
  for (const app of await folders(root)) {
    for (const kind of KINDS) {
      for (const name of await folders(join(root, app, kind))) {
        for (const extension of ENTRY_EXTENSIONS) {
          const path = `${app}/${kind}/${name}/${name}${extension}`;
          const text = await readInside(root, path);
          const key = text === undefined ? undefined : KEY.exec(text)?.[1];
          if (key === undefined) continue;
          // The first file of a folder with a key is its entry; the first folder with a key keeps it.
          if (!entries.has(key)) entries.set(key, path);
          break;
        }
      }
    }
  }
  return { root, entries };
}

/** The names of the folders in `dir`, sorted; none when it is no folder. */
async function folders(dir: string): Promise<string[]> {
  let found: Dirent[];
  try {
    found = await readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return found
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith(".") && entry.name !== "node_modules")
    .map((entry) => entry.name)
    .sort();
}

async function isFolder(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The text of `path` below `root`, or undefined when there is no such file, or when it is a link
 * that leads out of `root` (a package's symlink to elsewhere on the disk is not the tree's).
 */
async function readInside(
  root: string,
  path: string,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<string | undefined> {
  let real: string;
  try {
    real = await realpath(join(root, ...path.split("/")));
  } catch {
    return undefined;
  }
  const below = relative(root, real);
  if (below === "" || below.startsWith(`..${sep}`) || below === ".." || below.startsWith(sep)) return undefined;
  try {
    // Not read at all when it is too large.
    if ((await stat(real)).size > maxBytes) throw new FileTooLargeError(path, maxBytes);
    return await readFile(real, "utf8");
  } catch (error) {
    if (error instanceof FileTooLargeError) throw error;
    return undefined;
  }
}

class FileTooLargeError extends Error {
  constructor(path: string, maxBytes: number) {
    super(`${path} is larger than the ${maxBytes} bytes left`);
    this.name = "FileTooLargeError";
  }
}
