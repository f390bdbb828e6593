/**
 * Projects' File Stores (`$.files`, docs/file-stores.md): files kept by path per project. Trusted
 * code asks for a file's URLs, lists a folder and deletes; a file's content never passes through
 * core: the runtime reads and writes it at the URLs answered here, each good until `expiresAtMs`.
 * Adapters: `DiskFileStore` (files under `<data dir>/file-stores/`, URLs served by local mode
 * at `/files/...`) and `S3FileStore` (objects of one bucket, presigned URLs).
 *
 * Paths come checked (`fileStorePath` in runtime-layer/protocol.ts): relative, no empty, `.` or
 * `..` part, no control character; adapters still check that they stay inside the project.
 */
import type { FileStoreEntry } from "#runtime/protocol";

export interface FileStoreUrls {
  /** Reads the file (GET); 404 when there is none. */
  getUrl: string;
  /** Replaces the file with the request's body (PUT, with its length). */
  putUrl: string;
}

/** An entry as the runtime receives it (the wire shape of `files.dir`). */
export type { FileStoreEntry };

export interface FileStorePage {
  /** In name order, folders and files together. */
  entries: FileStoreEntry[];
  /** Where the next page starts, when there is one (opaque). */
  next?: string;
}

export interface FileStore {
  /** URLs to read and to replace the file at `path`, good until `expiresAtMs` (the file need not exist). */
  urls(projectId: string, path: string, expiresAtMs: number): Promise<FileStoreUrls>;
  /** One page of the folder at `folder` (`""`: the root); a folder that does not exist is empty. */
  list(projectId: string, folder: string, after: string | undefined, limit: number): Promise<FileStorePage>;
  /** Deletes the file at `path` (none there: nothing happens). Folders left empty go with it. */
  remove(projectId: string, path: string): Promise<void>;
}
