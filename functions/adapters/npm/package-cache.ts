/**
 * The content-addressed cache of installed npm packages: one folder per `name@range` (a missing
 * range is written `latest`, so `lodash` hashes `lodash@latest`), installed once by npm into a
 * temporary folder (a lockfile resolved and checked first, then `npm ci` from it: registry
 * tarballs only, decision 527) and renamed into place when complete, so a crash or a concurrent
 * install never leaves a half-filled entry.
 *
 *   <cacheDir>/
 *     <sha256("name@range")>/node_modules/<name>/...   one finished install per spec, never changed
 *     .install-<sha256>-<pid>-<random>/                 an install in progress (or left by a crash)
 *     .npm-home/                                        npm's own home and cache, when put here (AWS)
 *
 * Entries are never refreshed or evicted: `lodash` stays at the version that was latest on first
 * use. To take newer versions or reclaim space, stop Sluice and delete the folder (or one entry);
 * the next bundle that needs a package installs it again. Leftover `.install-*` folders and
 * `.npm-home` are safe to delete at any time Sluice is stopped.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, rm } from "node:fs/promises";
import { join, sep } from "node:path";
import { sha256Hex } from "#core/sha256";
import { type NpmSpecifier, npmInstallSpec } from "./import-specifier.ts";
import { type InstalledTreeStore, packTree, resolvedTreeKey, THIS_PLATFORM, unpackTree } from "./installed-trees.ts";
import { effectiveRegistry, type NpmRun, runNpmCi, runNpmLock } from "./npm-cli.ts";

/** The name of npm's own home inside a cache folder, when it is put there (dot-prefixed, as `.install-*`). */
export const NPM_HOME_FOLDER = ".npm-home";

/** A finished entry's folder name inside the cache, followed by the path inside it. */
export const CACHE_ENTRY_PATH = /^[0-9a-f]{64}[\\/]node_modules[\\/]./;

/** The cache folder of one spec: `<cacheDir>/<sha256 of "name@range">`. */
export function npmCacheFolder(cacheDir: string, name: string, range: string | undefined): string {
  return join(cacheDir, sha256Hex(npmInstallSpec(name, range)));
}

/** Installs in progress in this process, by cache folder: one install per spec at a time. */
const installs = new Map<string, Promise<string>>();

/**
 * The cache folder holding `spec`, installed first when it is not there yet. With `trees` (AWS),
 * an install is fetched from that shared store when another environment installed the same
 * resolved set (`installed-trees.ts`), and stored there once installed.
 */
export async function cachedOrInstalled(
  cacheDir: string,
  spec: NpmSpecifier,
  npm: NpmRun,
  trees?: InstalledTreeStore,
): Promise<string> {
  const folder = npmCacheFolder(cacheDir, spec.name, spec.range);
  if (isInstalled(folder, spec.name)) return folder;
  let install = installs.get(folder);
  if (!install) {
    install = installInto(cacheDir, folder, spec, npm, trees).finally(() => installs.delete(folder));
    installs.set(folder, install);
  }
  return install;
}

const isInstalled = (folder: string, name: string) => existsSync(join(folder, "node_modules", name, "package.json"));

/** Whether `spec` is in the cache already (no install needed). */
export const isCached = (cacheDir: string, spec: NpmSpecifier) =>
  isInstalled(npmCacheFolder(cacheDir, spec.name, spec.range), spec.name);

async function installInto(
  cacheDir: string,
  folder: string,
  spec: NpmSpecifier,
  npm: NpmRun,
  trees?: InstalledTreeStore,
): Promise<string> {
  const hash = folder.slice(folder.lastIndexOf(sep) + 1);
  const temporary = join(cacheDir, `.install-${hash}-${process.pid}-${randomBytes(4).toString("hex")}`);
  await mkdir(temporary, { recursive: true });
  try {
    if (trees) await fetchedOrInstalled(temporary, spec, npm, trees);
    else await lockedInstall(temporary, spec, npm);
    if (!isInstalled(temporary, spec.name)) throw new Error(`npm finished without installing ${spec.name}`);
    try {
      await rename(temporary, folder);
    } catch (error) {
      // Another Sluice process finished the same install first: its copy is as good as ours.
      if (!isInstalled(folder, spec.name)) throw error;
    }
    return folder;
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
}

/**
 * Installs `spec` into `temporary` from the registry only: resolved to a lockfile first, which must
 * name registry tarballs only ({@link nonRegistryPackage}), then installed from it (`npm ci`).
 */
async function lockedInstall(temporary: string, spec: NpmSpecifier, npm: NpmRun): Promise<void> {
  await checkedLock(temporary, spec, npm);
  await runNpmCi(temporary, npm);
}

/** The lockfile of `spec`, resolved in `temporary`; rejects when it names anything but registry tarballs. */
async function checkedLock(temporary: string, spec: NpmSpecifier, npm: NpmRun): Promise<string> {
  const lock = await runNpmLock(temporary, npmInstallSpec(spec.name, spec.range), npm);
  const refused = nonRegistryPackage(lock, await effectiveRegistry(npm));
  if (refused) throw new Error(refused);
  return lock;
}

/**
 * Why a lockfile cannot be installed, or undefined: every package must be a tarball of
 * `registry` (or bundled inside one). A package anyone can publish may depend on
 * `git+file:///srv/repo`, `file:/etc/..tgz`, a folder (a link) or `http://127.0.0.1/...tgz`,
 * which npm would copy from the server's disk or network into the bundle.
 */
export function nonRegistryPackage(lockText: string, registry: string): string | undefined {
  let lock: { packages?: Record<string, { resolved?: unknown; link?: unknown; inBundle?: unknown }> };
  try {
    lock = JSON.parse(lockText);
  } catch {
    return "npm wrote a lockfile that is not JSON";
  }
  const origin = new URL(registry).origin;
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === "" || entry.inBundle === true) continue;
    // A link's target is an entry by its path on disk (outside node_modules): not named here.
    if (!path.includes("node_modules/")) return "a dependency is a folder on disk, not a package of the registry";
    const name = path.replace(/^.*node_modules\//, "");
    if (entry.link === true) return `${name} is a folder on disk, not a package of the registry`;
    let url: URL | undefined;
    try {
      url = typeof entry.resolved === "string" ? new URL(entry.resolved) : undefined;
    } catch {}
    if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== origin) {
      return `${name} does not come from the registry (${origin}): only its packages are installed`;
    }
  }
  return undefined;
}

/**
 * Fills `temporary` with the tree of `spec` through the shared store: resolved to a lockfile
 * first, then fetched by its key, or installed from that lockfile and stored. The store is an
 * optimisation: when it fails (unreachable, a tree it refuses) the install goes on without it.
 */
async function fetchedOrInstalled(
  temporary: string,
  spec: NpmSpecifier,
  npm: NpmRun,
  trees: InstalledTreeStore,
): Promise<void> {
  const key = resolvedTreeKey(await checkedLock(temporary, spec, npm), THIS_PLATFORM);
  const stored = await trees.get(key).catch(() => undefined);
  if (stored) {
    try {
      await unpackTree(stored, temporary);
      if (isInstalled(temporary, spec.name)) return;
    } catch {
      // A tree that cannot be unpacked is installed anew (and not stored over the one there).
    }
    await rm(join(temporary, "node_modules"), { recursive: true, force: true });
    await runNpmCi(temporary, npm);
    return;
  }
  await runNpmCi(temporary, npm);
  if (!isInstalled(temporary, spec.name)) return;
  await trees.put(key, await packTree(temporary)).catch(() => {});
}
