/**
 * A shared cache of installed npm trees, keyed by the resolved dependency set: on AWS every
 * execution environment's `/tmp` starts empty, so without it each one would `npm install` again
 * what another already installed (up to 20 s of a request's 30 s). An install first resolves its
 * spec into a lockfile (`npm install --package-lock-only`: the registry's metadata, no tarballs);
 * the key is a hash of the platform and the lockfile's `name@version` set; a tree stored under
 * that key is unpacked instead of installed, and a tree installed (`npm ci` of that lockfile) is
 * stored for the next. Two specs that resolve to the same set share one tree; a new release of
 * any package in the tree makes a new key.
 *
 * The store (`S3InstalledTrees` on AWS) holds zips of the tree's regular files under
 * `node_modules/`. What comes back from it is checked as untrusted: paths stay inside the tree,
 * sizes and counts are bounded, only regular files are written.
 */
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, normalize, relative, sep } from "node:path";
import { unzipSync, zipSync } from "fflate";
import { sha256Hex } from "#core/sha256";

/** Where installed trees are kept between execution environments. */
export interface InstalledTreeStore {
  /** The zip stored under `key`, or undefined when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Stores `zip` under `key`; one already there is kept (the same set gives the same tree). */
  put(key: string, zip: Uint8Array): Promise<void>;
}

/** Largest tree stored or unpacked: Lambda's `/tmp` is 512 MB, shared with everything else. */
export const MAX_TREE_BYTES = 200 * 1024 * 1024;
/** Most files in one tree. */
export const MAX_TREE_FILES = 50_000;

const TREE_ROOT = "node_modules";

interface LockEntry {
  version?: unknown;
  name?: unknown;
  link?: unknown;
}

/**
 * The cache key of a resolved tree: sha256 of the platform (`linux-arm64`: packages with
 * per-platform optional dependencies install differently) and the sorted `name@version` of every
 * package in the lockfile (`package-lock.json` v2 or v3, `packages` map; the root left out).
 */
export function resolvedTreeKey(lockfile: string, platform: string): string {
  const lock = JSON.parse(lockfile) as { packages?: Record<string, LockEntry> };
  const entries = Object.entries(lock.packages ?? {}).filter(([path]) => path !== "");
  if (entries.length === 0) throw new Error("the lockfile lists no package");
  const set = entries.map(([path, entry]) => {
    const name = typeof entry.name === "string" ? entry.name : path.slice(path.lastIndexOf("node_modules/") + 13);
    return `${name}@${typeof entry.version === "string" ? entry.version : "?"}`;
  });
  return sha256Hex([`platform ${platform}`, ...[...new Set(set)].sort()].join("\n"));
}

/** The platform part of the key, for this process. */
export const THIS_PLATFORM = `${process.platform}-${process.arch}`;

/**
 * Zips the regular files of `<folder>/node_modules` (paths relative to `folder`), reproducibly:
 * links (`.bin`) are left out, the loader needs none.
 */
export async function packTree(folder: string): Promise<Uint8Array> {
  const files: Record<string, [Uint8Array, { mtime: Date }]> = {};
  let total = 0;
  let count = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const path = join(dir, name);
      const stat = await lstat(path);
      if (stat.isDirectory()) await walk(path);
      else if (stat.isFile()) {
        total += stat.size;
        count += 1;
        if (total > MAX_TREE_BYTES || count > MAX_TREE_FILES)
          throw new Error("the installed tree is too large to keep");
        files[relative(folder, path).split(sep).join("/")] = [await readFile(path), { mtime: ZIP_MTIME }];
      }
    }
  };
  await walk(join(folder, TREE_ROOT));
  return zipSync(files, { level: 6, mtime: ZIP_MTIME });
}

const ZIP_MTIME = new Date(2000, 0, 1);

/**
 * Writes a zip made by {@link packTree} into `folder`. Throws, writing nothing, when an entry
 * would land outside `<folder>/node_modules/`, or the archive is over the bounds.
 */
export async function unpackTree(zip: Uint8Array, folder: string): Promise<void> {
  let total = 0;
  let count = 0;
  // Sizes are checked from the directory before anything is inflated.
  const entries = unzipSync(zip, {
    filter: (file) => {
      total += file.originalSize;
      count += 1;
      if (total > MAX_TREE_BYTES || count > MAX_TREE_FILES) throw new Error("the stored tree is too large");
      return true;
    },
  });
  const root = join(folder, TREE_ROOT);
  const writes: [string, Uint8Array][] = [];
  for (const [name, bytes] of Object.entries(entries)) {
    if (name.endsWith("/")) continue;
    const path = normalize(join(folder, name));
    const inside = relative(root, path);
    if (isAbsolute(name) || name.includes("\\") || inside === "" || inside.startsWith("..") || isAbsolute(inside)) {
      throw new Error(`the stored tree names a file outside node_modules: ${JSON.stringify(name)}`);
    }
    writes.push([path, bytes]);
  }
  for (const [path, bytes] of writes) {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, bytes, { mode: 0o644 });
  }
}
