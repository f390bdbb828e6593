import { S3Client } from "@aws-sdk/client-s3";
import type { AwsPart } from "../composition.ts";
import { lazy } from "../lazy-ports.ts";
import { S3ObjectSink } from "../s3-object-sink.ts";

/**
 * Where `$.send.s3` writes (S3): functions that apply workflow runs only ask it about buckets; the
 * deliverer writes (its S3 client is made on the first put).
 */
export const part: AwsPart = {
  name: "objects",
  build({ config, client }) {
    return {
      objects: new S3ObjectSink({
        s3: lazy("the S3 client", () => client("s3", () => new S3Client({}))),
        buckets: config.s3Buckets,
        ...(config.s3ExpectedOwner ? { expectedOwner: config.s3ExpectedOwner } : {}),
      }),
    };
  },
};
