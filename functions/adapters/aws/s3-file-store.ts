/**
 * `FileStore` on AWS: each project's files are the objects `<project id>/<path>` of the stack's
 * File Store bucket (`SLUICE_FILE_STORE_BUCKET`), and a file's URLs are S3 pre-signed URLs, as the
 * original's: `GetObject` and `PutObject` of that one key, signed by the function that serves the
 * run's calls (the only one with rights on the bucket), good until the time asked or until that
 * function's own credentials expire, whichever is first. Component code holds no credentials.
 *
 * Folders are what S3's listing with a `/` delimiter shows: a folder is there while a file is in it.
 */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import type { FileStore, FileStoreEntry, FileStorePage, FileStoreUrls } from "#core/ports/file-store";

/** Signs a command as `getSignedUrl` of `@aws-sdk/s3-request-presigner` does. */
export type UrlSigner = (
  s3: S3Client,
  command: GetObjectCommand | PutObjectCommand,
  options: { expiresIn: number },
) => Promise<string>;

export interface S3FileStoreOptions {
  readonly s3: S3Client;
  /** The File Store bucket; undefined when the stack made none (every call then fails, saying so). */
  readonly bucket: string | undefined;
  readonly sign: UrlSigner;
  readonly now: () => number;
  /** The account that must own the bucket (`ExpectedBucketOwner`). */
  readonly expectedOwner?: string;
}

/** Project ids as Sluice makes them: a key prefix that cannot reach another project's. */
const PROJECT_ID = /^[A-Za-z0-9_]{1,64}$/;

export class S3FileStore implements FileStore {
  constructor(private readonly options: S3FileStoreOptions) {}

  async urls(projectId: string, path: string, expiresAtMs: number): Promise<FileStoreUrls> {
    const { s3, sign } = this.options;
    const target = this.#target(projectId, path);
    const expiresIn = Math.max(1, Math.floor((expiresAtMs - this.options.now()) / 1000));
    const [getUrl, putUrl] = await Promise.all([
      sign(s3, new GetObjectCommand(target), { expiresIn }),
      sign(s3, new PutObjectCommand(target), { expiresIn }),
    ]);
    return { getUrl, putUrl };
  }

  async list(projectId: string, folder: string, after: string | undefined, limit: number): Promise<FileStorePage> {
    const root = this.#key(projectId, "");
    const prefix = folder === "" ? root : `${root}${folder}/`;
    const out = await this.options.s3.send(
      new ListObjectsV2Command({
        ...this.#bucket(),
        Prefix: prefix,
        Delimiter: "/",
        MaxKeys: limit,
        ...(after === undefined ? {} : { ContinuationToken: after }),
      }),
    );
    const entries: FileStoreEntry[] = [];
    for (const common of out.CommonPrefixes ?? []) {
      const path = common.Prefix?.slice(root.length).replace(/\/$/, "");
      if (path) entries.push({ path, name: path.slice(path.lastIndexOf("/") + 1), type: "directory" });
    }
    for (const object of out.Contents ?? []) {
      const path = object.Key?.slice(root.length);
      if (!path || path.endsWith("/")) continue;
      const entry: FileStoreEntry = { path, name: path.slice(path.lastIndexOf("/") + 1), type: "file" };
      if (object.Size !== undefined) entry.size = object.Size;
      if (object.LastModified) entry.modifiedAtMs = object.LastModified.getTime();
      entries.push(entry);
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return out.IsTruncated && out.NextContinuationToken ? { entries, next: out.NextContinuationToken } : { entries };
  }

  async remove(projectId: string, path: string): Promise<void> {
    // One request: S3 answers a key that is not there as deleted too.
    await this.options.s3.send(new DeleteObjectCommand(this.#target(projectId, path)));
  }

  #bucket(): { Bucket: string; ExpectedBucketOwner?: string } {
    const { bucket, expectedOwner } = this.options;
    if (!bucket) throw new Error("this stack has no File Store bucket (SLUICE_FILE_STORE_BUCKET is not set)");
    return { Bucket: bucket, ...(expectedOwner ? { ExpectedBucketOwner: expectedOwner } : {}) };
  }

  #key(projectId: string, path: string): string {
    if (!PROJECT_ID.test(projectId)) throw new Error("not a project id");
    return `${projectId}/${path}`;
  }

  #target(projectId: string, path: string) {
    return { ...this.#bucket(), Key: this.#key(projectId, path) };
  }
}
