import { S3Client } from "@aws-sdk/client-s3";
import { type AwsPart, lazy } from "../composition.ts";
import { S3InstalledTrees } from "../s3-installed-trees.ts";

/**
 * The store of installed npm trees (S3, `npm-trees/` of the stack's bucket), given to the "host"
 * part's bundler. Only the functions that install components' packages have this part (the
 * `access.compute: "deploy"` routes and the deploy finisher), and only they are deployed with
 * the bucket's name and rights; without the name, packages are installed as before, each
 * execution environment for itself.
 */
export const part: AwsPart = {
  name: "trees",
  build: () => ({}),
  share({ config, client }) {
    const bucket = config.npmTreesBucket;
    if (bucket === undefined) return {};
    return {
      installedTrees: new S3InstalledTrees({
        // Made on the first install, not at the cold start.
        s3: lazy("the S3 client", () => client("s3", () => new S3Client({}))),
        bucket,
        ...(config.s3ExpectedOwner ? { expectedOwner: config.s3ExpectedOwner } : {}),
      }),
    };
  },
};
