/**
 * Each local sandbox process's `/tmp` (decision 551): a folder of its own under
 * `<data dir>/sandbox-tmp/`, made when the process starts and removed when it exits, as a Lambda
 * execution environment's `/tmp` lives and dies with it. The child may write there and nowhere
 * else (`sandbox-process.ts`); its code names it `/tmp` (`runtime-layer/tmp-folder.ts`).
 *
 * What it may hold is bounded twice: one file by the process's RLIMIT_FSIZE (a write past it fails
 * with `EFBIG`), and all of it by {@link tmpUsage}, which the process's owner runs every second
 * while the process has work and kills the process when it is over.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { lstat, opendir, rm } from "node:fs/promises";
import { join } from "node:path";

/** How much a sandbox process's `/tmp` may hold. */
export interface SandboxTmpSettings {
  /** The folder the processes' folders are made in (`<data dir>/sandbox-tmp`). */
  readonly root: string;
  /** Bytes on disk of one process's folder at most (and of one file in it). */
  readonly maxBytes: number;
}

/** Files and folders one process's `/tmp` may hold: each costs the check a `stat`. */
export const MAX_TMP_ENTRIES = 10_000;

/** Makes a new process's folder under `root` (only this user can enter it). */
export function newTmpFolder(root: string): string {
  mkdirSync(root, { recursive: true, mode: 0o700 });
  return mkdtempSync(join(root, "p-"));
}

/** Removes a folder of a process that has exited; a failure is left for the next start. */
export async function removeTmpFolder(folder: string): Promise<void> {
  await rm(folder, { recursive: true, force: true, maxRetries: 2 }).catch(() => {});
}

/**
 * Removes what processes of an earlier run of the server left (it was killed before they exited).
 * Called once, before any sandbox process starts.
 */
export function clearTmpRoot(root: string): void {
  rmSync(root, { recursive: true, force: true, maxRetries: 2 });
}

export interface TmpUsage {
  /** Bytes on disk counted (blocks of 512), and entries, until the count stopped. */
  readonly bytes: number;
  readonly entries: number;
  /** Past `maxBytes` or {@link MAX_TMP_ENTRIES}: counting stopped there. */
  readonly over: boolean;
}

/**
 * What `folder` holds on disk, counted until it is over `maxBytes` or `maxEntries`. Links are not
 * followed (a sandbox process cannot make one: the permission model refuses them). A folder that
 * vanishes meanwhile counts as empty.
 */
export async function tmpUsage(folder: string, maxBytes: number, maxEntries = MAX_TMP_ENTRIES): Promise<TmpUsage> {
  let bytes = 0;
  let entries = 0;
  const folders = [folder];
  for (let next = folders.pop(); next !== undefined; next = folders.pop()) {
    let dir: Awaited<ReturnType<typeof opendir>>;
    try {
      dir = await opendir(next, { bufferSize: 128 });
    } catch {
      continue;
    }
    try {
      for await (const entry of dir) {
        const path = join(next, entry.name);
        if (++entries > maxEntries) return { bytes, entries, over: true };
        if (entry.isDirectory()) {
          folders.push(path);
          continue;
        }
        const stats = await lstat(path).catch(() => undefined);
        // Blocks, not size: a sparse file takes what it holds (RLIMIT_FSIZE bounds its size).
        bytes += stats ? stats.blocks * 512 : 0;
        if (bytes > maxBytes) return { bytes, entries, over: true };
      }
    } catch {
      // Removed while read: what was counted stands.
    }
  }
  return { bytes, entries, over: false };
}
