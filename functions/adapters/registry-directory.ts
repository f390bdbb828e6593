/**
 * A components tree in the public registry's layout (`SLUICE_REGISTRY_DIR`, issue 15): a checkout
 * of its `components/` folder, a folder holding one (`<dir>/components/`), or installed
 * `@pipedream/<app>` packages (`node_modules/@pipedream/`). Every `<app>/sources/<name>/<name>.*`
 * and `<app>/actions/<name>/<name>.*` whose code declares a `key` is served by that key, with the
 * files it imports by relative path (`../../<app>.app.mjs`, `../common/base.mjs`, another app's
 * file) read from the tree, never from above its root, bounded as a `component_url` is.
 *
 * Keys are read from the files' text (`key: "http-new-requests"`, the registry's first key
 * literal), on first use, and again when a key is asked for that the index lacks and the apps'
 * folder changed since (an app folder added or replaced), or the folders where that key would be
 * (a component added inside an app); a changed file is read again at each request (and is a new
 * component by its code hash).
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
  let index: Promise<RegistryIndex> | undefined;
  const indexed = () => {
    if (!index) {
      index = indexTree(dir);
      index.catch(() => {
        index = undefined;
      });
    }
    return index;
  };
  /**
   * The index, read again when a key is missing and the apps' folder changed since (`sluice
   * registry add` moves a new app folder in): a component added so is served without a restart,
   * while a request for an unknown key costs one `stat`, not a walk of the tree.
   */
  const entryOf = async (key: string) => {
    const current = await indexed();
    const entry = current.entries.get(key);
    if (entry !== undefined) return { ...current, entry };
    const changed = (await changedAt(dir)) !== current.changedAt || (await keyFoldersChanged(current, key));
    if (!changed) return { ...current, entry };
    index = undefined;
    const fresh = await indexed();
    return { ...fresh, entry: fresh.entries.get(key) };
  };
  return {
    async readCode(key) {
      const { root, entry } = await entryOf(key);
      if (entry === undefined || root === undefined) return fallback.readCode(key);
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

/** What {@link indexTree} found: the apps' folder (undefined when there is none) and each key's entry. */
export interface RegistryIndex {
  root: string | undefined;
  /** Entry path below `root` (`<app>/sources/<name>/<name>.mjs`) by key, in the order found. */
  entries: Map<string, string>;
  /** When the apps' folder last changed (its mtime), undefined when there is none. */
  changedAt: number | undefined;
  /** When the walk began (epoch ms): a folder changed since may hold what the index lacks. */
  indexedAt: number;
}

/**
 * Whether the folders where `key` would be (`<app>/sources/`, `<app>/actions/` and the folders
 * named after the rest of the key in them, the app being the key up to its first `-`, as the
 * registry names them) changed since the index was made: a component added inside an app already
 * indexed, or written into a folder that was empty then. A few `stat`s per unknown key.
 */
async function keyFoldersChanged(index: RegistryIndex, key: string): Promise<boolean> {
  if (index.root === undefined) return false;
  const folders = keyFolders(index.root, key);
  if (folders.length === 0) return false;
  const times = await Promise.all(
    folders.map((folder) =>
      stat(folder).then(
        (found) => found.mtimeMs,
        () => 0,
      ),
    ),
  );
  // File systems stamp times from a coarse clock, which may lag Date.now() by a tick: a folder
  // changed within this margin before the walk counts as changed (one walk too many, at worst).
  return times.some((time) => time >= index.indexedAt - MTIME_MARGIN_MS);
}

const MTIME_MARGIN_MS = 2000;

/** What a registry key is made of (`<app>-<name>`): a key with a `/`, `.` or anything else names no folder. */
const REGISTRY_KEY = /^[A-Za-z0-9_]+-[A-Za-z0-9_-]+$/;

/**
 * The folders under `root` where `key` would be: `<app>/{sources,actions}` and the folder named
 * after the rest of the key in each. None for a key that is no registry key: a key comes from a
 * request, and `../` in it would name folders outside the tree.
 */
export function keyFolders(root: string, key: string): string[] {
  if (!REGISTRY_KEY.test(key)) return [];
  const dash = key.indexOf("-");
  const app = key.slice(0, dash);
  const rest = key.slice(dash + 1);
  return KINDS.flatMap((kind) => [join(root, app, kind), join(root, app, kind, rest)]);
}

/** The apps' folder of `dir`: its `components/` when it has one, else `dir` itself. */
export async function appsFolderOf(dir: string): Promise<string> {
  const nested = join(dir, "components");
  return (await isFolder(nested)) ? nested : dir;
}

/** When the apps' folder of `dir` last changed; undefined when it does not exist. */
async function changedAt(dir: string): Promise<number | undefined> {
  try {
    return (await stat(await appsFolderOf(dir))).mtimeMs;
  } catch {
    return undefined;
  }
}

/**
 * Every component of `dir` with a key (see the file header); no entries when `dir` does not exist
 * (yet: the default `<data dir>/registry` exists once `sluice registry add` made it).
 */
export async function indexTree(dir: string): Promise<RegistryIndex> {
  const entries = new Map<string, string>();
  const indexedAt = Date.now();
  const apps = await appsFolderOf(dir);
  const before = await changedAt(dir);
  let root: string;
  try {
    root = await realpath(apps);
  } catch {
    return { root: undefined, entries, changedAt: undefined, indexedAt };
  }
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
  return { root, entries, changedAt: before, indexedAt };
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
