import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { mockClient } from "aws-sdk-client-mock";
import { describe, expect, it } from "vitest";
import { AWS_PART_NAMES, type AwsPart, type AwsPartContext, buildAwsDeps, loadParts } from "#adapters/aws/composition";
import { part as secrets } from "#adapters/aws/parts/secrets";
import { part as tables } from "#adapters/aws/parts/tables";
import { part as trees } from "#adapters/aws/parts/trees";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { route as getMe } from "#http/get-me";
import { awsPartsFor, lambdaHandler } from "#http/lambda";
import { AWS_STAND_INS, loadedBy, sourcesUnder } from "../../support/import-boundaries.ts";
import { REPO_ROOT } from "../../support/local-process.ts";

const tree = sourcesUnder(REPO_ROOT, ["functions"]);
/** The AWS SDK packages loading `file` loads with it (static imports, followed through the tree). */
const sdkLoadedBy = (file: string) => [...loadedBy(tree, file)].filter((name) => name.startsWith("@aws-sdk/")).sort();

// Each function's cold start loads the SDK clients of its parts only (docs/aws.md "Cold starts").
describe("the AWS composition's parts", () => {
  it("leaves every SDK client to the parts: the composition itself loads none", () => {
    expect(sdkLoadedBy("functions/adapters/aws/composition.ts")).toEqual([]);
  });

  it.each([
    ["tables", ["@aws-sdk/client-dynamodb", "@aws-sdk/lib-dynamodb"]],
    ["host", ["@aws-sdk/client-lambda"]],
    ["runs", ["@aws-sdk/client-lambda"]],
    ["timers", ["@aws-sdk/client-scheduler"]],
    ["purger", ["@aws-sdk/client-lambda"]],
    ["secrets", ["@aws-sdk/client-kms"]],
    ["bus", ["@aws-sdk/client-eventbridge", "@aws-sdk/client-sqs"]],
    ["deliveries", ["@aws-sdk/client-sqs"]],
    ["objects", ["@aws-sdk/client-s3"]],
    ["files", ["@aws-sdk/client-s3", "@aws-sdk/s3-request-presigner"]],
    // Its S3 client loads at the first install that asks the store (a dynamic import), not with the part.
    ["trees", []],
    ["delays", ["@aws-sdk/client-dynamodb", "@aws-sdk/client-scheduler", "@aws-sdk/lib-dynamodb"]],
    ["pauses", ["@aws-sdk/client-dynamodb", "@aws-sdk/client-scheduler", "@aws-sdk/lib-dynamodb"]],
  ])("loads for the %s part only %j", async (name, packages) => {
    expect(sdkLoadedBy(`functions/adapters/aws/parts/${name}.ts`)).toEqual(packages);
    const [part] = await loadParts({ [name]: () => import(`#adapters/aws/parts/${name}`) });
    expect(part?.name).toBe(name);
  });

  it("has a module for every part name, and refuses a part loaded under another's name", async () => {
    expect(AWS_PART_NAMES).toHaveLength(13);
    await expect(loadParts({ secrets: async () => ({ part: tables }) })).rejects.toThrow(
      'the part loaded as "secrets" is the "tables" part',
    );
  });

  it("fails a port of a part the function was bundled without at its use, naming the part", async () => {
    const env = { [ENV.resourcesTable]: "sluice-resources", [AWS_COMPUTE_ENV.secretsKeyArn]: "arn:aws:kms:x" };
    const deps = buildAwsDeps([tables], env);
    // Building the composition and passing ports around touch nothing.
    const { secrets: sealed, runs, host } = deps;
    expect([sealed, runs, host]).toHaveLength(3);
    await expect(async () => deps.secrets.seal("plain")).rejects.toThrow(
      /the secrets port could not be built: this function was bundled without the "secrets" part/,
    );
    expect(() => deps.runs.enqueue).toThrow(/without the "runs" part/);
    // Publishing without the bus part does nothing, as on a function the stack gave no bus.
    await expect(deps.bus.publish([], { userId: "u_1", workspaceId: "o_1" })).resolves.toBeUndefined();
    // With the part, the port is there (its client is made on first use).
    expect(typeof buildAwsDeps([tables, secrets], env).secrets.seal).toBe("function");
  });

  it("builds without the table's name only when the function has no table part", () => {
    expect(() => buildAwsDeps([], {})).not.toThrow();
    expect(() => buildAwsDeps([tables], {})).toThrow(ENV.resourcesTable);
  });
});

describe("the trees part", () => {
  /** A stand-in for the host part: what the parts shared with it when it built. */
  const sharedWithHost = (env: Record<string, string>) => {
    let shared: AwsPartContext["shared"] | undefined;
    const host: AwsPart = {
      name: "host",
      build: (context) => {
        shared = context.shared;
        return {};
      },
    };
    // The host listed first: what is shared is there before any part builds.
    buildAwsDeps([host, trees], env);
    return shared;
  };
  const KEY = "b".repeat(64);

  it("gives the host's bundler the S3 store of npm-trees/ in the bucket the stack named, owned by its account", async () => {
    const s3 = mockClient(S3Client);
    try {
      s3.on(GetObjectCommand).rejects(Object.assign(new Error("NoSuchKey"), { name: "NoSuchKey" }));
      s3.on(PutObjectCommand).resolves({});
      const store = sharedWithHost({
        [ENV.npmTreesBucket]: "sluice-dev-npm-trees",
        [ENV.s3ExpectedOwner]: "123456789012",
      })?.installedTrees;
      expect(store).toBeDefined();
      expect(await store!.get(KEY)).toBeUndefined();
      await store!.put(KEY, new Uint8Array([1, 2]));
      const where = {
        Bucket: "sluice-dev-npm-trees",
        Key: `npm-trees/${KEY}.zip`,
        ExpectedBucketOwner: "123456789012",
      };
      expect(s3.commandCalls(GetObjectCommand)[0]!.args[0].input).toEqual(where);
      expect(s3.commandCalls(PutObjectCommand)[0]!.args[0].input).toMatchObject({ ...where, IfNoneMatch: "*" });
    } finally {
      s3.restore();
    }
  });

  it("gives nothing without the bucket's name (packages are installed as before), and refuses a name S3 would", () => {
    expect(sharedWithHost({})).toEqual({});
    expect(() => sharedWithHost({ [ENV.npmTreesBucket]: "Not_A_Bucket" })).toThrow(ENV.npmTreesBucket);
  });
});

describe("a route's Lambda entry", () => {
  it("names the parts its access needs", () => {
    expect(awsPartsFor({ resources: "read" })).toEqual(["tables"]);
    expect(awsPartsFor({})).toEqual([]);
    expect(awsPartsFor({ resources: "write", compute: "deploy", secrets: "seal" })).toEqual([
      "bus",
      "delays",
      "host",
      "secrets",
      "tables",
      "timers",
      "trees",
    ]);
    expect(awsPartsFor({ resources: "write", compute: "describe" })).toEqual(["host", "tables"]);
    expect(awsPartsFor({ resources: "write", compute: "probe" })).toEqual(["host", "tables"]);
    expect(awsPartsFor({ resources: "write", eventPurges: true })).toEqual(["delays", "purger", "tables"]);
    expect(awsPartsFor({ resources: "write", deliveries: true })).toEqual(["deliveries", "tables"]);
    expect(awsPartsFor({ resources: "write", compute: "remove", secrets: "seal", pausedRuns: true })).toEqual([
      "bus",
      "delays",
      "host",
      "pauses",
      "secrets",
      "tables",
      "timers",
    ]);
  });

  it("refuses parts other than its access needs, when its module is loaded", () => {
    expect(() => lambdaHandler(getMe, {})).toThrow(
      'Route "get-me" names the AWS parts [], but its access needs [tables]',
    );
    expect(() => lambdaHandler(getMe, { tables, secrets })).toThrow(/\[secrets, tables\]/);
    expect(typeof lambdaHandler(getMe, { tables })).toBe("function");
  });

  it("imports stand-ins for its parts outside a Lambda bundle, which load no SDK client and fail if built", async () => {
    const { part: standIn } = await import("#aws-parts/tables");
    expect(() => standIn.name).toThrow(/bundled into Lambda functions only \(esbuild conditions "sluice-lambda"/);
    expect(() => standIn.build({} as AwsPartContext)).toThrow(/sluice-aws-parts/);
    const { loadAwsDeps } = await import("#aws-composition");
    await expect(loadAwsDeps({})).rejects.toThrow(/sluice-lambda/);
    expect(sdkLoadedBy(AWS_STAND_INS)).toEqual([]);
    expect(sdkLoadedBy("functions/http/get-me.ts")).toEqual([]);
  });
});
