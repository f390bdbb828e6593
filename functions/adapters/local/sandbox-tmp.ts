/**
 * Each local sandbox process's `/tmp` (decision 551): a folder of its own under
 * `<data dir>/sandbox/tmp/`, made when the process starts and removed when it exits, as a Lambda
 * execution environment's `/tmp` lives and dies with it. The child may write there and nowhere
 * else (`sandbox-process.ts`); its code names it `/tmp` (`runtime-layer/tmp-folder.ts`).
 *
 * What it may hold is bounded twice: one file by the process's RLIMIT_FSIZE (a write past it fails
 * with `EFBIG`), and all of it by {@link tmpUsage}, which the process's owner runs every second
 * and kills the process when it is over. The folder is the child's to shape, so the measure and
 * the removal expect the worst of it (decision 553): names that are not UTF-8, paths past
 * PATH_MAX, folders it made unreadable, files it deleted but holds open.
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, type Stats, statSync } from "node:fs";
import { lstat, opendir, rm, stat } from "node:fs/promises";
import { join } from "node:path";

/** How much a sandbox process's `/tmp` may hold. */
export interface SandboxTmpSettings {
  /** The folder the processes' folders are made in (`<data dir>/sandbox/tmp`). */
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

/**
 * The commands that remove a tree whatever its child left in it, when Node's `rm` could not: its
 * folders made writable and searchable again first (a child can `chmod` its own to 0), and `rm`
 * walks by descriptor, so paths past PATH_MAX go too (Node's `rm` fails on both). Not on Windows,
 * which has neither.
 */
const canShellRemove = process.platform !== "win32";
const UNLOCK = ["-R", "u+rwx", "--"];
const REMOVE = ["-rf", "--"];
/** A removal that takes longer is left for the next start. */
const REMOVE_TIMEOUT_MS = 60_000;

const run = (command: string, args: string[]) =>
  new Promise<void>((resolve) => execFile(command, args, { timeout: REMOVE_TIMEOUT_MS }, () => resolve()));

/**
 * Removes a folder of a process that has exited; what cannot go is left for the next start. Node's
 * `rm` first (no process started: the common case, an empty or plain folder), the shell's when it
 * fails.
 */
export async function removeTmpFolder(folder: string): Promise<void> {
  const removed = await rm(folder, { recursive: true, force: true, maxRetries: 2 }).then(
    () => true,
    () => false,
  );
  if (removed || !canShellRemove) return;
  await run("chmod", [...UNLOCK, folder]);
  await run("rm", [...REMOVE, folder]);
}

/**
 * Removes what processes of an earlier run of the server left (it was killed before they exited).
 * Called once, before any sandbox process starts. Never throws: a tree that will not go is moved
 * aside (`<root>.left-<time>`) and named in the returned warning, so a child's leftovers cannot
 * keep the server from starting.
 */
export function clearTmpRoot(root: string): string | undefined {
  if (!existsSync(root)) return undefined;
  try {
    rmSync(root, { recursive: true, force: true, maxRetries: 2 });
  } catch {
    if (canShellRemove) {
      spawnSync("chmod", [...UNLOCK, root], { timeout: REMOVE_TIMEOUT_MS, stdio: "ignore" });
      spawnSync("rm", [...REMOVE, root], { timeout: REMOVE_TIMEOUT_MS, stdio: "ignore" });
    }
  }
  if (!existsSync(root)) return undefined;
  const aside = `${root}.left-${Date.now()}`;
  try {
    renameSync(root, aside);
    return `the sandbox processes' /tmp folders of an earlier run could not be removed; they were moved to ${aside}: remove them by hand`;
  } catch (error) {
    return `the sandbox processes' /tmp folders of an earlier run could not be removed (${(error as Error).message}): remove ${root} by hand`;
  }
}

export interface TmpUsage {
  /** Bytes on disk counted (blocks of 512), and entries, until the count stopped. */
  readonly bytes: number;
  readonly entries: number;
  /** Past `maxBytes` or {@link MAX_TMP_ENTRIES}, or not measurable: counting stopped there. */
  readonly over: boolean;
  /** Why it could not be measured (a folder it may not read, a path too long), when so. */
  readonly unmeasurable?: string;
}

/**
 * What `folder` holds on disk, counted until it is over `maxBytes` or `maxEntries`, folders
 * included; with `pid`, also the files that process holds open after deleting them (Linux's
 * `/proc/<pid>/fd`), which no walk sees. Names are read as bytes (a child can make names that are
 * not UTF-8). Links are not followed (a sandbox process cannot make one). A tree the server cannot
 * read whole (a folder its child made unreadable, a path past PATH_MAX) counts as over: the child
 * made it so. A folder that vanished meanwhile counts as empty.
 */
export async function tmpUsage(
  folder: string,
  maxBytes: number,
  maxEntries = MAX_TMP_ENTRIES,
  pid?: number,
): Promise<TmpUsage> {
  let bytes = pid === undefined ? 0 : await deletedOpenBytes(pid);
  // The common case, an empty folder, costs one synchronous read (an async walk costs about 0.2 ms
  // of CPU, paid once a second by every live process).
  if (isEmpty(folder)) return { bytes, entries: 0, over: bytes > maxBytes };
  let entries = 0;
  const folders: Buffer[] = [Buffer.from(folder)];
  for (let next = folders.pop(); next !== undefined; next = folders.pop()) {
    let dir: Awaited<ReturnType<typeof opendir>>;
    try {
      dir = await opendir(next, { bufferSize: 128, encoding: "buffer" as BufferEncoding });
    } catch (error) {
      if (isGone(error)) continue;
      return { bytes, entries, over: true, unmeasurable: (error as NodeJS.ErrnoException).code ?? "error" };
    }
    try {
      for await (const entry of dir) {
        const name = entry.name as unknown as Buffer;
        const path = Buffer.concat([next, SLASH, name]);
        if (++entries > maxEntries) return { bytes, entries, over: true };
        const stats = await lstat(path).catch((error: unknown) => (isGone(error) ? undefined : Promise.reject(error)));
        // Blocks, not size: a sparse file takes what it holds (RLIMIT_FSIZE bounds its size).
        bytes += stats ? stats.blocks * 512 : 0;
        if (bytes > maxBytes) return { bytes, entries, over: true };
        if (stats?.isDirectory()) folders.push(path);
      }
    } catch (error) {
      if (!isGone(error)) {
        return { bytes, entries, over: true, unmeasurable: (error as NodeJS.ErrnoException).code ?? "error" };
      }
    }
  }
  return { bytes, entries, over: bytes > maxBytes };
}

const SLASH = Buffer.from("/");

const isGone = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

/** Whether `folder` holds nothing (or is gone); false when it cannot be read (the walk says why). */
function isEmpty(folder: string): boolean {
  try {
    return readdirSync(folder).length === 0;
  } catch (error) {
    return isGone(error);
  }
}

/**
 * Descriptors a process may have beyond which their `stat`s go to the thread pool rather than run
 * on the event loop: a sandbox process's usual 20 or so cost about 60 µs synchronously, against
 * about 1 ms of CPU as async calls; the 1,024 it may hold (`SANDBOX_OPEN_FILES`), a few ms.
 */
const SYNC_FD_STATS = 64;

/**
 * Bytes on disk of the regular files process `pid` holds open with no name left (deleted): its
 * `/tmp` keeps them until it closes them. 0 where `/proc` is not (macOS) or the process is gone.
 * `stat` follows a descriptor's link to the open file itself, deleted or not.
 */
async function deletedOpenBytes(pid: number): Promise<number> {
  const fds = `/proc/${pid}/fd`;
  let names: string[];
  try {
    names = readdirSync(fds);
  } catch {
    return 0;
  }
  const held = (stats: Stats | undefined) => (stats?.isFile() && stats.nlink === 0 ? stats.blocks * 512 : 0);
  let bytes = 0;
  for (const name of names) {
    bytes +=
      names.length <= SYNC_FD_STATS
        ? held(statSync(`${fds}/${name}`, { throwIfNoEntry: false }))
        : held(await stat(`${fds}/${name}`).catch(() => undefined));
  }
  return bytes;
}
