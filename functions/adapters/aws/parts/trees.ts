import type { InstalledTreeStore } from "#adapters/npm/installed-trees";
import type { AwsPart } from "../composition.ts";
import { once } from "../lazy-ports.ts";

/**
 * The store of installed npm trees (S3, `npm-trees/` of the stack's bucket), given to the "host"
 * part's bundler. Only the functions that install components' packages have this part (the
 * `access.compute: "deploy"` routes and the deploy finisher), and only they are deployed with
 * the bucket's name and rights; without the name, packages are installed as before, each
 * execution environment for itself.
 *
 * The S3 client and the store load at the first install that asks the store, not at the cold
 * start: most deploys install nothing (shipped packages, or the environment's own `/tmp` cache),
 * and the client's module is costly to load (docs/aws.md "Cold starts").
 */
export const part: AwsPart = {
  name: "trees",
  build: () => ({}),
  share({ config, client }) {
    const bucket = config.npmTreesBucket;
    if (bucket === undefined) return {};
    const store = once(async (): Promise<InstalledTreeStore> => {
      const [{ S3Client }, { S3InstalledTrees }] = await Promise.all([
        import("@aws-sdk/client-s3"),
        import("../s3-installed-trees.ts"),
      ]);
      return new S3InstalledTrees({
        s3: client("s3", () => new S3Client({})),
        bucket,
        ...(config.s3ExpectedOwner ? { expectedOwner: config.s3ExpectedOwner } : {}),
      });
    });
    return {
      installedTrees: {
        get: async (key) => (await store()).get(key),
        put: async (key, zip) => (await store()).put(key, zip),
      },
    };
  },
};
