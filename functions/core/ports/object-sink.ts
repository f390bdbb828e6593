/** What one `putObject` came to: stored, or why not (the delivery is retried, then dead-lettered). */
export type ObjectPutResult = { stored: true } | { error: string };

/**
 * Where `$.send.s3` writes (docs/design/workflows.md 3.10). Adapters: `LocalObjectSink` (files under
 * `<data dir>/s3/<bucket>/`, `functions/adapters/local/local-object-sink.ts`) and `S3ObjectSink`
 * (AWS). Each knows the buckets this server allows (`SLUICE_S3_BUCKETS`) and writes to no other.
 */
export interface ObjectSink {
  /** Whether `bucket` is one this server allows a workflow to write to. */
  allowsBucket(bucket: string): boolean;
  /**
   * Why `key` can never be stored here (too long; locally a key that is no file path below a
   * folder), or undefined: a send with such a key is refused when its run ends, not retried.
   */
  keyProblem(key: string): string | undefined;
  /**
   * Stores `body` as the object `key` of `bucket`, replacing one already there (an attempt made
   * again writes the same object). Never rejects for what the bucket or the key is: a bucket not
   * allowed, a key that cannot be stored, a refusal of the store all come back as `{ error }`.
   */
  putObject(bucket: string, key: string, body: string, contentType: string): Promise<ObjectPutResult>;
}

/** Parses `SLUICE_S3_BUCKETS` (comma-separated, blanks ignored; empty: no bucket is allowed). */
export function bucketList(setting: string | undefined): string[] {
  return [
    ...new Set(
      (setting ?? "")
        .split(",")
        .map((name) => name.trim())
        .filter((name) => name !== ""),
    ),
  ];
}

/** S3's rule for bucket names: 3 to 63 lower-case letters, digits, dots and hyphens, no `..`. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function isBucketName(name: string): boolean {
  return BUCKET_NAME.test(name) && !name.includes("..");
}
