/**
 * `InstalledTreeStore` on S3 (`functions/adapters/npm/installed-trees.ts`): each installed npm tree
 * is one object, `npm-trees/<key>.zip`, where the key is the hash of the platform and the resolved
 * `name@version` set. Objects are never replaced (`If-None-Match: *`): the same key always stands
 * for the same tree, so the first one stored stays, and two deploys storing at once cannot
 * interleave.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import type { InstalledTreeStore } from "#adapters/npm/installed-trees";
import { MAX_TREE_BYTES } from "#adapters/npm/installed-trees";
import { NPM_TREES_PREFIX } from "#config/shared-names";
import { hasErrorName } from "./sdk-errors.ts";

export interface S3InstalledTreesOptions {
  readonly s3: S3Client;
  readonly bucket: string;
  /** The account that must own the bucket (`ExpectedBucketOwner`). Undefined: not checked. */
  readonly expectedOwner?: string;
}

export class S3InstalledTrees implements InstalledTreeStore {
  readonly #options: S3InstalledTreesOptions;

  constructor(options: S3InstalledTreesOptions) {
    this.#options = options;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const out = await this.#options.s3.send(new GetObjectCommand(this.#request(key)));
      // A tree larger than any tree stored here is not read into memory.
      if ((out.ContentLength ?? 0) > MAX_TREE_BYTES) return undefined;
      return out.Body ? await out.Body.transformToByteArray() : undefined;
    } catch (error) {
      if (hasErrorName(error, "NoSuchKey")) return undefined;
      throw error;
    }
  }

  async put(key: string, zip: Uint8Array): Promise<void> {
    try {
      await this.#options.s3.send(
        new PutObjectCommand({ ...this.#request(key), Body: zip, ContentType: "application/zip", IfNoneMatch: "*" }),
      );
    } catch (error) {
      // Stored meanwhile by another deploy of the same set: that one stays.
      if (hasErrorName(error, "PreconditionFailed") || hasErrorName(error, "ConditionalRequestConflict")) return;
      throw error;
    }
  }

  #request(key: string) {
    if (!/^[0-9a-f]{64}$/.test(key)) throw new Error("an installed tree's key is a sha256 in hex");
    return {
      Bucket: this.#options.bucket,
      Key: `${NPM_TREES_PREFIX}${key}.zip`,
      ...(this.#options.expectedOwner ? { ExpectedBucketOwner: this.#options.expectedOwner } : {}),
    };
  }
}
