/**
 * `ObjectSink` on AWS: `$.send.s3` is a `PutObject` by the deliverer, to the buckets of
 * `SLUICE_S3_BUCKETS` only (the stack sets it from `-c s3Buckets` and grants `s3:PutObject` on
 * `arn:aws:s3:::<bucket>/*` for those, nothing else; docs/aws.md).
 *
 * Every refusal (a bucket not listed, a key S3 cannot take, S3's own answer, the network) comes
 * back as `{ error }`, never a rejection: the delivery is retried and then dead-lettered as a
 * webhook's would be, and one bad object never blocks the queue (decision 183).
 */
import { PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { isBucketName, type ObjectPutResult, type ObjectSink } from "#core/ports/object-sink";

/** S3's longest key, in UTF-8 bytes. */
const KEY_MAX_BYTES = 1024;
/** How much of S3's error message an error keeps (it lands on a dead letter and in the log). */
const MESSAGE_MAX_CHARS = 300;

export interface S3ObjectSinkOptions {
  readonly s3: S3Client;
  /** The allowed buckets (`SLUICE_S3_BUCKETS`); a name that is not an S3 bucket name is ignored. */
  readonly buckets: readonly string[];
  /**
   * The account that must own the bucket (`ExpectedBucketOwner`): S3 refuses the put when another
   * account owns it, e.g. a listed bucket deleted and re-created elsewhere. Undefined: not checked.
   */
  readonly expectedOwner?: string;
}

export class S3ObjectSink implements ObjectSink {
  readonly #s3: S3Client;
  readonly #buckets: ReadonlySet<string>;
  readonly #expectedOwner: string | undefined;

  constructor(options: S3ObjectSinkOptions) {
    this.#s3 = options.s3;
    this.#buckets = new Set(options.buckets.filter(isBucketName));
    this.#expectedOwner = options.expectedOwner;
  }

  allowsBucket(bucket: string): boolean {
    return this.#buckets.has(bucket);
  }

  keyProblem(key: string): string | undefined {
    if (key === "") return "the key is empty";
    if (Buffer.byteLength(key, "utf8") > KEY_MAX_BYTES) return `the key is over ${KEY_MAX_BYTES} bytes`;
    return undefined;
  }

  async putObject(bucket: string, key: string, body: string, contentType: string): Promise<ObjectPutResult> {
    // Checked again here: a delivery queued before the list changed must not write elsewhere.
    if (!this.allowsBucket(bucket)) return { error: "the bucket is not allowed on this server" };
    const problem = this.keyProblem(key);
    if (problem !== undefined) return { error: problem };
    try {
      await this.#s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: body,
          ContentType: contentType,
          ...(this.#expectedOwner ? { ExpectedBucketOwner: this.#expectedOwner } : {}),
        }),
      );
      return { stored: true };
    } catch (error) {
      const { name, message } = error as { name?: unknown; message?: unknown };
      const text = typeof message === "string" && message !== "" ? message : "S3 refused the object";
      return { error: `${typeof name === "string" ? name : "Error"}: ${text.slice(0, MESSAGE_MAX_CHARS)}` };
    }
  }
}
