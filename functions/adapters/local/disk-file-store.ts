/**
 * `FileStore` of local mode: each project's files under `<data dir>/file-stores/<project id>/`,
 * their URLs served by local mode itself at `/files/<token>/<name>` (`file-store-server.ts`).
 * A URL's token is sealed by the server's `Secrets` (the project, the path, GET or PUT, an expiry):
 * it cannot be forged or turned from reading into writing, and is good for 30 minutes, as the
 * original's pre-signed URLs. Files are 0600 and folders 0700, as the rest of the data dir.
 *
 * A path comes checked (no empty, `.` or `..` part); the resolved file is checked to be inside the
 * project's folder all the same. A file is written beside the store and renamed onto its place,
 * so a reader never sees half a file. A project holds at most `maxProjectBytes` in all.
 */
import { randomBytes } from "node:crypto";
import { createWriteStream, type ReadStream } from "node:fs";
import { lstat, mkdir, open, readdir, rename, rm, rmdir, stat } from "node:fs/promises";
import { join, relative, resolve, sep } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { conflict, DomainError } from "#core/errors";
import type { FileStore, FileStoreEntry, FileStorePage, FileStoreUrls } from "#core/ports/file-store";
import type { Secrets } from "#core/ports/secrets";
import { fileStorePath } from "#runtime/protocol";

/** The folder of the File Stores, in the data dir. */
export const FILE_STORES_FOLDER = "file-stores";
/** Where uploads are written before they are renamed onto their place (outside every project). */
const INCOMING = ".incoming";
/** The path local mode serves file URLs at: `/files/<token>/<name>`. */
export const FILE_URL_PATH = /^\/files\/(f1\.\d{1,15}\.[A-Za-z0-9_.-]{1,4096})(?:\/[^/]*)?$/;
const TOKEN_FORMAT = /^f1\.(\d{1,15})\.([A-Za-z0-9_.-]+)$/;
/** Project ids as Sluice makes them; anything else names no folder. */
const PROJECT_ID = /^[A-Za-z0-9_]{1,64}$/;

interface TokenBody {
  v: 1;
  /** What the sealed text is: the server's key also seals secrets, which must never open as a URL. */
  kind: "file-url";
  project: string;
  path: string;
  method: "GET" | "PUT";
  expiresAtMs: number;
}

/** What a file URL's token grants, once opened. */
export type FileGrant = Pick<TokenBody, "project" | "path" | "method">;

export interface DiskFileStoreOptions {
  dataDir: string;
  secrets: Secrets;
  /** The server's public URL, where the child processes reach it (read when a URL is made). */
  publicUrl: () => string;
  now: () => number;
  /** All of one project's files together (`SLUICE_FILE_STORE_MB`). */
  maxProjectBytes: number;
}

export class DiskFileStore implements FileStore {
  readonly root: string;
  /**
   * What each project holds (in blocks) and the bytes of its uploads in flight: its folder is walked
   * once, then kept up to date by this server's writes and removals. Uploads in flight count as
   * their bytes arrive, so concurrent ones cannot together pass the bound.
   */
  readonly #usage = new Map<string, Promise<{ stored: number; incoming: number }>>();

  constructor(private readonly options: DiskFileStoreOptions) {
    this.root = resolve(options.dataDir, FILE_STORES_FOLDER);
  }

  async urls(projectId: string, path: string, expiresAtMs: number): Promise<FileStoreUrls> {
    const base = `${this.options.publicUrl().replace(/\/+$/, "")}/files`;
    const name = encodeURIComponent(path.slice(path.lastIndexOf("/") + 1));
    const url = async (method: TokenBody["method"]) => {
      const body: TokenBody = { v: 1, kind: "file-url", project: projectId, path, method, expiresAtMs };
      return `${base}/f1.${expiresAtMs}.${await this.options.secrets.seal(JSON.stringify(body))}/${name}`;
    };
    return { getUrl: await url("GET"), putUrl: await url("PUT") };
  }

  /** What `token` grants, or why it grants nothing (forged, changed, expired). */
  async openToken(token: string): Promise<FileGrant | { refused: string }> {
    const clear = TOKEN_FORMAT.exec(token);
    if (!clear) return { refused: "this file URL is not valid" };
    const expiresAtMs = Number(clear[1]);
    if (this.options.now() > expiresAtMs) return { refused: "this file URL has expired: ask the file for a new one" };
    try {
      const body = JSON.parse(await this.options.secrets.open(clear[2] as string)) as Partial<TokenBody>;
      const path = fileStorePath(body.path);
      const valid =
        body.v === 1 &&
        body.kind === "file-url" &&
        body.expiresAtMs === expiresAtMs &&
        typeof body.project === "string" &&
        PROJECT_ID.test(body.project) &&
        "path" in path &&
        (body.method === "GET" || body.method === "PUT");
      if (!valid) return { refused: "this file URL is not valid" };
      return { project: body.project as string, path: body.path as string, method: body.method as "GET" | "PUT" };
    } catch {
      return { refused: "this file URL is not valid" };
    }
  }

  /** Where the file at `path` of a project is (whether or not it exists). */
  fileOf(projectId: string, path: string): string {
    const folder = this.projectFolder(projectId);
    const file = resolve(folder, ...path.split("/"));
    if (!file.startsWith(folder + sep)) throw new DomainError("validation", "the File Store path leaves its project");
    return file;
  }

  /** A stream of the file's content and its size, or undefined when there is no such file. */
  async read(projectId: string, path: string): Promise<{ size: number; stream: ReadStream } | undefined> {
    const file = this.fileOf(projectId, path);
    try {
      if (!(await lstat(file)).isFile()) return undefined;
      // The size of the very file opened: an upload renamed onto the path meanwhile is not read.
      const handle = await open(file, "r");
      const { size } = await handle.stat();
      return { size, stream: handle.createReadStream() };
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
  }

  /**
   * Replaces the file at `path` with `body`, which must be `length` bytes when a length is given.
   * Refused (nothing changed): over the project's bound, a length that does not match, a file or
   * folder in the way.
   */
  async write(projectId: string, path: string, body: Readable, length: number | undefined): Promise<void> {
    const file = this.fileOf(projectId, path);
    const max = this.options.maxProjectBytes;
    const usage = await this.#usageRecord(projectId);
    // The file it replaces frees its blocks once replaced; until then both count, but for its own.
    const before = blocks(await fileSize(file));
    const over = (more: number) => usage.stored - before + usage.incoming + more > max;
    if (length !== undefined && over(blocks(length))) throw tooLarge(max);
    const incoming = join(this.root, INCOMING);
    await mkdir(incoming, { recursive: true, mode: 0o700 });
    const temporary = join(incoming, randomBytes(12).toString("hex"));
    let written = 0;
    try {
      await pipeline(
        body,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            if (over(chunk.length)) throw tooLarge(max);
            written += chunk.length;
            usage.incoming += chunk.length;
            yield chunk;
          }
        },
        createWriteStream(temporary, { mode: 0o600 }),
      );
      if (length !== undefined && written !== length) {
        throw new DomainError(
          "validation",
          `the upload was ${written} bytes, not the ${length} its Content-Length said`,
        );
      }
      // What it replaced and the folders it made are counted as they are at the rename, not as
      // they were when the upload began (a deletion meanwhile gave its blocks back already).
      const { replaced, folders } = await this.placeFile(projectId, path, temporary);
      usage.stored = Math.max(0, usage.stored + blocks(written) - blocks(replaced) + folders * BLOCK);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    } finally {
      usage.incoming -= written;
    }
  }

  async list(projectId: string, folder: string, after: string | undefined, limit: number): Promise<FileStorePage> {
    const base = folder === "" ? this.projectFolder(projectId) : this.fileOf(projectId, folder);
    let names: string[];
    try {
      names = (await readdir(base)).sort();
    } catch (error) {
      if (isMissing(error) || (error as NodeJS.ErrnoException).code === "ENOTDIR") return { entries: [] };
      throw error;
    }
    const start = after === undefined ? 0 : names.findIndex((name) => name > after);
    const chosen = start < 0 ? [] : names.slice(start, start + limit);
    const entries: FileStoreEntry[] = [];
    for (const name of chosen) {
      const info = await lstat(join(base, name)).catch(() => undefined);
      if (!info || !(info.isFile() || info.isDirectory())) continue;
      const path = folder === "" ? name : `${folder}/${name}`;
      entries.push(
        info.isFile()
          ? { path, name, type: "file", size: info.size, modifiedAtMs: Math.floor(info.mtimeMs) }
          : { path, name, type: "directory" },
      );
    }
    const last = chosen.at(-1);
    return start >= 0 && start + limit < names.length && last !== undefined ? { entries, next: last } : { entries };
  }

  async remove(projectId: string, path: string): Promise<void> {
    const file = this.fileOf(projectId, path);
    const usage = await this.#usageRecord(projectId);
    const size = await fileSize(file);
    if (size === undefined) return;
    let removed = 0;
    await rm(file, { force: true });
    // As in S3, a folder is only the files in it: folders left empty go.
    const folder = this.projectFolder(projectId);
    for (let parent = resolve(file, ".."); parent.startsWith(folder + sep); parent = resolve(parent, "..")) {
      try {
        await rmdir(parent);
        removed += 1;
      } catch {
        break;
      }
    }
    usage.stored = Math.max(0, usage.stored - blocks(size) - removed * BLOCK);
  }

  /** What the project's files and folders take, in blocks ({@link BLOCK}), walked the first time and kept up to date. */
  async usageOf(projectId: string): Promise<number> {
    return (await this.#usageRecord(projectId)).stored;
  }

  /**
   * The project's usage record, changed in place by writes and removals: its folder is walked the
   * first time, once however many ask (a walk that fails is tried again by the next).
   */
  #usageRecord(projectId: string): Promise<{ stored: number; incoming: number }> {
    let usage = this.#usage.get(projectId);
    if (!usage) {
      usage = folderBlocks(this.projectFolder(projectId)).then((stored) => ({ stored, incoming: 0 }));
      this.#usage.set(projectId, usage);
      usage.catch(() => this.#usage.delete(projectId));
    }
    return usage;
  }

  private projectFolder(projectId: string): string {
    if (!PROJECT_ID.test(projectId)) throw new DomainError("validation", "not a project id");
    return join(this.root, projectId);
  }

  /** Renames `temporary` onto the file's place, making its folders; a file or folder in the way is a conflict. */
  private async placeFile(
    projectId: string,
    path: string,
    temporary: string,
  ): Promise<{ replaced: number | undefined; folders: number }> {
    const file = this.fileOf(projectId, path);
    const folder = this.projectFolder(projectId);
    const parts = relative(folder, file).split(sep);
    await mkdir(folder, { recursive: true, mode: 0o700 });
    let at = folder;
    let folders = 0;
    for (const [index, part] of parts.slice(0, -1).entries()) {
      at = join(at, part);
      try {
        await mkdir(at, { mode: 0o700 });
        folders += 1;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
        if (!(await lstat(at)).isDirectory()) {
          throw conflict(
            `the File Store has a file at "${parts.slice(0, index + 1).join("/")}", where "${path}" needs a folder`,
          );
        }
      }
    }
    const existing = await lstat(file).catch(() => undefined);
    const folderThere = () => conflict(`the File Store has a folder at "${path}": delete the files in it first`);
    if (existing && !existing.isFile()) throw folderThere();
    try {
      await rename(temporary, file);
    } catch (error) {
      // Another upload made a folder here (or a file where a folder was) since the checks above.
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST") throw folderThere();
      if (code === "ENOTDIR" || code === "ENOENT")
        throw conflict(`a file or folder on the way to "${path}" changed: try again`);
      throw error;
    }
    return { replaced: existing?.size, folders };
  }

  /**
   * Removes what uploads a previous process left in `.incoming` (a kill mid-upload): called once at
   * start, before any upload of this process. Never throws: a leftover it cannot remove is logged.
   */
  async clearIncoming(warn: (message: string) => void): Promise<void> {
    try {
      await rm(join(this.root, INCOMING), { recursive: true, force: true });
    } catch (error) {
      warn(`could not remove the File Stores' unfinished uploads: ${(error as Error).message}`);
    }
  }
}

/**
 * What a file or folder is counted as against the bound: whole blocks of 4 KiB, and at least one
 * (an empty file, a folder: each takes an inode and a block on disk, and would otherwise be free).
 */
const BLOCK = 4096;
const blocks = (size: number | undefined) => (size === undefined ? 0 : Math.max(1, Math.ceil(size / BLOCK)) * BLOCK);

function tooLarge(max: number): DomainError {
  return new DomainError(
    "payload_too_large",
    `the project's File Store may hold at most ${max >= 1024 * 1024 ? `${Math.floor(max / (1024 * 1024))} MiB` : `${max} bytes`} in all (SLUICE_FILE_STORE_MB)`,
  );
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === "ENOENT" || code === "ENOTDIR";
}

/** The size of the file at `path`, or undefined when there is no file there. */
async function fileSize(path: string): Promise<number | undefined> {
  try {
    const info = await lstat(path);
    return info.isFile() ? info.size : undefined;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** What the files and folders below `folder` take, in blocks (0 when there is no folder). */
async function folderBlocks(folder: string): Promise<number> {
  let total = 0;
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(folder, { withFileTypes: true });
  } catch (error) {
    if (isMissing(error)) return 0;
    throw error;
  }
  for (const entry of entries) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) total += BLOCK + (await folderBlocks(path));
    else if (entry.isFile()) total += blocks((await stat(path)).size);
  }
  return total;
}
