/**
 * `ObjectSink` of local mode: `$.send.s3` writes files, `<data dir>/s3/<bucket>/<key>` (docs/security.md
 * "Workflow sends"). Files are 0600 and folders 0700, as the rest of the data dir.
 *
 * The key comes from a workflow's code (its `prefix`): whatever it is, nothing is written outside
 * the bucket's folder. A key that is absolute, holds a NUL, or has an empty, `.` or `..` segment
 * is refused, and the resolved path is checked to be inside the folder all the same. A file is
 * written beside its place and renamed onto it, so a reader never sees half an object and a
 * link at the key's place is replaced, never followed.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { isBucketName, type ObjectPutResult, type ObjectSink } from "#core/ports/object-sink";

/** The folder of the objects, in the data dir. */
export const OBJECTS_FOLDER = "s3";

/** S3's longest key, in UTF-8 bytes. */
const KEY_MAX_BYTES = 1024;
/** The longest file or folder name of the file systems Sluice runs on, in bytes. */
const SEGMENT_MAX_BYTES = 255;

/** Why `key` cannot be a file below a folder, or undefined when it can. */
function keyProblem(key: string): string | undefined {
  if (key === "") return "the key is empty";
  if (Buffer.byteLength(key, "utf8") > KEY_MAX_BYTES) return `the key is over ${KEY_MAX_BYTES} bytes`;
  if (key.includes("\0")) return "the key holds a NUL character";
  if (key.startsWith("/") || isAbsolute(key)) return "the key is absolute";
  const segments = key.split("/");
  if (segments.some((segment) => segment === "" || segment === "." || segment === "..")) {
    return "the key has an empty, . or .. segment";
  }
  if (segments.some((segment) => Buffer.byteLength(segment, "utf8") > SEGMENT_MAX_BYTES)) {
    return `a segment of the key is over ${SEGMENT_MAX_BYTES} bytes (a file name locally)`;
  }
  return undefined;
}

export class LocalObjectSink implements ObjectSink {
  private readonly root: string;
  private readonly buckets: ReadonlySet<string>;

  /** @param dataDir the server's data dir; @param buckets the allowed buckets (`SLUICE_S3_BUCKETS`). */
  constructor(dataDir: string, buckets: readonly string[]) {
    this.root = resolve(dataDir, OBJECTS_FOLDER);
    this.buckets = new Set(buckets.filter(isBucketName));
  }

  allowsBucket(bucket: string): boolean {
    return this.buckets.has(bucket);
  }

  keyProblem(key: string): string | undefined {
    return keyProblem(key);
  }

  /** Where `key` of `bucket` is stored, or undefined when it would not be inside the bucket's folder. */
  pathOf(bucket: string, key: string): string | undefined {
    if (!this.allowsBucket(bucket) || keyProblem(key) !== undefined) return undefined;
    const folder = join(this.root, bucket);
    const path = resolve(folder, key);
    const inside = relative(folder, path);
    if (inside === "" || inside.startsWith(`..${sep}`) || inside === ".." || isAbsolute(inside)) return undefined;
    return path;
  }

  async putObject(bucket: string, key: string, body: string, _contentType: string): Promise<ObjectPutResult> {
    if (!this.allowsBucket(bucket)) return { error: "the bucket is not allowed on this server" };
    const problem = keyProblem(key);
    const path = this.pathOf(bucket, key);
    if (problem !== undefined || path === undefined) return { error: problem ?? "the key leaves the bucket" };
    const temporary = `${path}.${randomBytes(6).toString("hex")}.partial`;
    try {
      await mkdir(resolve(path, ".."), { recursive: true, mode: 0o700 });
      await writeFile(temporary, body, { flag: "wx", mode: 0o600 });
      await rename(temporary, path);
      return { stored: true };
    } catch (error) {
      await rm(temporary, { force: true }).catch(() => {});
      const code = (error as NodeJS.ErrnoException).code;
      return { error: code ? `${code}: the object could not be written` : String(error) };
    }
  }
}
