import { S3Client } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { systemClock } from "#core/ports/clock";
import type { AwsPart } from "../composition.ts";
import { lazy } from "../lazy-ports.ts";
import { S3FileStore } from "../s3-file-store.ts";

/** Projects' File Stores (S3): the function that serves runs' `$.files` calls signs their URLs. */
export const part: AwsPart = {
  name: "files",
  build({ config, client }) {
    return {
      files: new S3FileStore({
        s3: lazy("the S3 client", () => client("s3", () => new S3Client({}))),
        bucket: config.fileStoreBucket,
        sign: getSignedUrl,
        now: () => systemClock.nowMs(),
        ...(config.s3ExpectedOwner ? { expectedOwner: config.s3ExpectedOwner } : {}),
      }),
    };
  },
};
