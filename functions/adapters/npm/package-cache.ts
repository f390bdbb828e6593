/**
 * The content-addressed cache of installed npm packages: one folder per `name@range` (a missing
 * range is written `latest`, so `lodash` hashes `lodash@latest`), installed once by npm into a
 * temporary folder and renamed into place when complete, so a crash or a concurrent install
 * never leaves a half-filled entry.
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
import { type NpmRun, runNpmInstall } from "./npm-cli.ts";

/** The name of npm's own home inside a cache folder, when it is put there (dot-prefixed, as `.install-*`). */
export const NPM_HOME_FOLDER = ".npm-home";

/** A finished entry's folder name inside the cache, followed by the path inside it. */
export const CACHE_ENTRY_PATH = /^[0-9a-f]{64}[\\/]node_modules[\\/]./;

/** The cache folder of one spec: `<cacheDir>/<sha256 of "name@range">`. */
export function npmCacheFolder(cacheDir: string, name: string, range: string | undefined): string {
  return join(cacheDir, sha256Hex(npmInstallSpec(name, range)));
}

/** Installs in progress in this process, by cache folder: one `npm install` per spec at a time. */
const installs = new Map<string, Promise<string>>();

/** The cache folder holding `spec`, installed first when it is not there yet. */
export async function cachedOrInstalled(cacheDir: string, spec: NpmSpecifier, npm: NpmRun): Promise<string> {
  const folder = npmCacheFolder(cacheDir, spec.name, spec.range);
  if (isInstalled(folder, spec.name)) return folder;
  let install = installs.get(folder);
  if (!install) {
    install = installInto(cacheDir, folder, spec, npm).finally(() => installs.delete(folder));
    installs.set(folder, install);
  }
  return install;
}

const isInstalled = (folder: string, name: string) => existsSync(join(folder, "node_modules", name, "package.json"));

async function installInto(cacheDir: string, folder: string, spec: NpmSpecifier, npm: NpmRun): Promise<string> {
  const hash = folder.slice(folder.lastIndexOf(sep) + 1);
  const temporary = join(cacheDir, `.install-${hash}-${process.pid}-${randomBytes(4).toString("hex")}`);
  await mkdir(temporary, { recursive: true });
  try {
    await runNpmInstall(temporary, npmInstallSpec(spec.name, spec.range), npm);
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
