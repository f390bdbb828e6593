import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { App, type CfnElement, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { type CfnFunction, Function as LambdaFunction, LayerVersion, Runtime } from "aws-cdk-lib/aws-lambda";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chooseEsbuild, esbuildBinaryPath } from "#adapters/aws/native-esbuild";
import { bundleComponent, loadEsbuild, RUNTIME_LAYER_MODULE } from "#adapters/aws/source-bundle";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { bundledNpmCli } from "#adapters/npm/npm-cli";
import { awsPartsFor } from "#http/lambda";
import { routes } from "#http/routes";
import { esbuildCode } from "../../lib/constructs/esbuild-code.ts";
import { LAMBDA_ESBUILD_PACKAGE, LAMBDA_ESBUILD_TARGET } from "../../lib/constructs/lambda-esbuild.ts";
import { ESM_REQUIRE_BANNER, PROJECT_ROOT, SluiceFunction } from "../../lib/constructs/sluice-function.ts";
import { DESCRIBER_FILES, RUNTIME_LAYER_ENTRY, RUNTIME_LAYER_FILE } from "../../lib/constructs/source-compute.ts";
import { ServiceStack } from "../../lib/service-stack.ts";
import { StatefulStack } from "../../lib/stateful-stack.ts";
import { sourcesUnder } from "../support/import-boundaries.ts";
import { type BuiltBundle, bundleFunctions } from "../support/lambda-bundles.ts";

// Skips the CloudFormation validation plugin; bundling still runs.
process.env.CDK_VALIDATION = "false";

interface BundledFunction {
  dir: string;
  environment: Record<string, unknown>;
}

/**
 * Invokes a bundle's `handler` in a fresh Node process that has only the function's environment
 * from the template, as on Lambda.
 */
function invoke(fn: BundledFunction, method: string, path: string): { statusCode: number; body: string } {
  const env = Object.fromEntries(
    Object.entries(fn.environment).map(([name, value]) => [name, typeof value === "string" ? value : "sluice-test"]),
  );
  const event = {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: "",
    headers: {},
    requestContext: { http: { method, path }, requestId: "infra-test" },
    isBase64Encoded: false,
  };
  const script = `
    const { handler } = await import(${JSON.stringify(pathToFileURL(join(fn.dir, "index.mjs")).href)});
    const result = await handler(${JSON.stringify(event)}, { awsRequestId: "infra-test", functionName: "infra-test" });
    process.stdout.write("\\n" + JSON.stringify(result));`;
  const output = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { PATH: process.env.PATH, AWS_REGION: "us-east-1", ...env },
    encoding: "utf8",
  });
  // The result is the last line; the handler's own logs may come before it.
  return JSON.parse(output.trimEnd().split("\n").at(-1) ?? "");
}

/** The SDK packages of each part (test/unit/adapters/aws-composition-parts.test.ts checks the parts' imports). */
const PART_CLIENTS: Record<string, readonly string[]> = {
  tables: ["@aws-sdk/client-dynamodb", "@aws-sdk/lib-dynamodb"],
  host: ["@aws-sdk/client-lambda"],
  runs: ["@aws-sdk/client-lambda"],
  timers: ["@aws-sdk/client-scheduler"],
  purger: ["@aws-sdk/client-lambda"],
  secrets: ["@aws-sdk/client-kms"],
  bus: ["@aws-sdk/client-eventbridge", "@aws-sdk/client-sqs"],
  deliveries: ["@aws-sdk/client-sqs"],
  objects: ["@aws-sdk/client-s3"],
  files: ["@aws-sdk/client-s3"],
  trees: ["@aws-sdk/client-s3"],
  delays: ["@aws-sdk/client-dynamodb", "@aws-sdk/client-scheduler", "@aws-sdk/lib-dynamodb"],
  pauses: ["@aws-sdk/client-dynamodb", "@aws-sdk/client-scheduler", "@aws-sdk/lib-dynamodb"],
};

/** The parts of the functions that are not routes, as their entries name them (after their grants). */
const INTERNAL_PARTS: Record<string, readonly string[]> = {
  "functions/http/route-not-found.ts": [],
  "functions/internal/endpoint-function.ts": [
    "tables",
    "host",
    "runs",
    "secrets",
    "bus",
    "deliveries",
    "objects",
    "delays",
    "pauses",
  ],
  "functions/internal/source-runner.ts": [
    "tables",
    "host",
    "secrets",
    "bus",
    "deliveries",
    "objects",
    "delays",
    "pauses",
  ],
  "functions/internal/timer-invoker.ts": [
    "tables",
    "host",
    "runs",
    "secrets",
    "bus",
    "deliveries",
    "objects",
    "delays",
  ],
  "functions/internal/deploy-sweeper.ts": ["tables", "host", "timers", "delays"],
  "functions/internal/account-refresher.ts": ["tables", "secrets", "bus"],
  // What POST /v1/sources deploys with.
  "functions/internal/deploy-finisher.ts": ["tables", "host", "timers", "secrets", "bus", "delays", "trees"],
  "functions/internal/delayed-emit-deliverer.ts": ["tables", "bus", "delays"],
  "functions/internal/paused-run-dispatcher.ts": ["tables", "runs", "pauses"],
  "functions/internal/event-dispatcher.ts": ["tables", "runs", "deliveries"],
  "functions/internal/event-purger.ts": ["tables"],
  "functions/internal/source-stream-function.ts": ["tables"],
  "functions/internal/sse-redirect.ts": [],
  "functions/internal/webhook-deliverer.ts": ["tables", "secrets", "objects"],
};

/** Clients an entry makes itself, outside the parts: the deliverer's retry queue (SQS), made on the first retry. */
const OWN_CLIENTS: Record<string, readonly string[]> = {
  "functions/internal/webhook-deliverer.ts": ["@aws-sdk/client-sqs"],
};

/** The client packages (`client-*`, `lib-*`) of the SDK a function's entry should bring into its bundle. */
function expectedClients(entry: string): string[] {
  const route = routes.find((r) => entry === `functions/http/${r.name}.ts`);
  const parts = route ? awsPartsFor(route.access) : INTERNAL_PARTS[entry];
  if (parts === undefined) throw new Error(`no expected parts for ${entry}: add it to INTERNAL_PARTS`);
  return [...new Set([...parts.flatMap((part) => PART_CLIENTS[part] ?? []), ...(OWN_CLIENTS[entry] ?? [])])].sort();
}

const clientsOf = (bundle: BuiltBundle) => bundle.sdkPackages.filter((name) => /^@aws-sdk\/(client|lib)-/.test(name));

const lockedVersion = (name: string): string =>
  JSON.parse(readFileSync(join(PROJECT_ROOT, "package-lock.json"), "utf8")).packages[`node_modules/${name}`].version;

/**
 * The ServiceStack's template is synthesized without bundling (CDK's `NodejsFunction` runs one
 * esbuild per function, each parsing the SDK again: minutes for about sixty functions). Every
 * function's entry is then bundled here, in one esbuild run with the options the construct gives
 * `NodejsFunction`, and a few functions are made again, from the very props the stack gave them,
 * in a small stack that CDK does bundle: their bundles must be the same file, which is what lets
 * the one-run bundles stand for CDK's.
 */
describe("ServiceStack bundling", () => {
  let app: App;
  let service: ServiceStack;
  let template: Template;
  let functions: SluiceFunction[];
  let bundles: Map<string, BuiltBundle>;
  /** The sample stack, bundled by CDK. */
  let cdkApp: App;
  let samples: Map<string, SluiceFunction>;
  let sampleTemplate: Template;
  let layer: LayerVersion;
  let describer: LambdaFunction;

  beforeAll(async () => {
    // Inside the project (cdk.out is ignored by git), as `cdk synth` bundles.
    mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
    const outdir = mkdtempSync(join(PROJECT_ROOT, "cdk.out", "infra-test-"));
    app = new App({ outdir: join(outdir, "service"), context: { "aws:cdk:bundling-stacks": [] } });
    const stateful = new StatefulStack(app, "SluiceStateful");
    service = new ServiceStack(app, "SluiceService", {
      resourcesTable: stateful.resourcesTable,
      secretsKey: stateful.secretsKey,
      fileStoreBucket: stateful.fileStoreBucket,
    });
    template = Template.fromStack(service);
    functions = service.node.findAll().filter((node): node is SluiceFunction => node instanceof SluiceFunction);
    bundles = await bundleFunctions(functions, join(outdir, "bundles"));

    cdkApp = new App({ outdir: join(outdir, "cdk") });
    const stack = new Stack(cdkApp, "BundlingSample");
    const sampled = [
      service.routeFunctions.get("get-me")!.function,
      service.routeFunctions.get("get-openapi")!.function,
      service.routeFunctions.get("create-source")!.function,
      service.notFoundFunction,
    ];
    // Without their environment, the route functions' shared log group and role, which name the service
    // stack's resources (and are not bundled).
    samples = new Map(
      sampled.map((fn, index) => [
        fn.entry,
        new SluiceFunction(stack, `Sample${index}`, {
          ...fn.props,
          environment: {},
          logGroup: undefined,
          role: undefined,
        }),
      ]),
    );
    // What SourceCompute makes of the same files.
    layer = new LayerVersion(stack, "RuntimeLayer", {
      code: esbuildCode({ [RUNTIME_LAYER_FILE]: RUNTIME_LAYER_ENTRY }),
    });
    describer = new LambdaFunction(stack, "Describer", {
      code: esbuildCode(DESCRIBER_FILES),
      handler: "index.handler",
      runtime: Runtime.NODEJS_22_X,
    });
    sampleTemplate = Template.fromStack(stack);
  }, 240_000);

  afterAll(() => {
    if (app) rmSync(join(app.outdir, ".."), { recursive: true, force: true });
  });

  /** A sample function's bundle directory, named by the asset hash its S3 key carries, and its environment. */
  function bundleOf(fn: SluiceFunction): BundledFunction {
    const sample = samples.get(fn.entry);
    if (!sample) throw new Error(`${fn.entry} is not bundled by CDK here: add it to the samples`);
    const cfn = sample.lambdaFunction.node.defaultChild as CfnFunction;
    const props = sampleTemplate.findResources("AWS::Lambda::Function")[Stack.of(cfn).getLogicalId(cfn)]?.Properties;
    expect(props?.Code?.S3Key, fn.entry).toMatch(/^[0-9a-f]{64}\.zip$/);
    // The environment the stack gives the function, not the sample's.
    const own = fn.lambdaFunction.node.defaultChild as CfnFunction;
    const environment =
      template.findResources("AWS::Lambda::Function")[Stack.of(own).getLogicalId(own)]?.Properties.Environment
        ?.Variables ?? {};
    return { dir: join(cdkApp.outdir, `asset.${props.Code.S3Key.replace(/\.zip$/, "")}`), environment };
  }

  it("bundles every function's entry into an ESM file with a source map", () => {
    expect(functions.length).toBeGreaterThan(50);
    expect(new Set(functions.map((fn) => fn.entry)).size).toBe(bundles.size);
    for (const fn of functions) {
      const { dir } = bundles.get(fn.entry)!;
      const code = readFileSync(join(dir, "index.mjs"), "utf8");
      expect(code.startsWith(ESM_REQUIRE_BANNER), fn.entry).toBe(true);
      const map = JSON.parse(readFileSync(join(dir, "index.mjs.map"), "utf8")) as { sources: string[] };
      expect(
        map.sources.some((source) => source.endsWith(fn.entry)),
        fn.entry,
      ).toBe(true);
    }
  });

  it("makes the same bundle as CDK's NodejsFunction from the construct's options", () => {
    for (const [entry, sample] of samples) {
      const cdkCode = readFileSync(join(bundleOf(sample).dir, "index.mjs"), "utf8");
      expect(readFileSync(join(bundles.get(entry)!.dir, "index.mjs"), "utf8") === cdkCode, entry).toBe(true);
    }
  });

  it("bundles the AWS SDK at the lockfile's versions, each function with only the clients its parts use", () => {
    const clients = new Map<string, string[]>();
    for (const fn of functions) {
      const bundle = bundles.get(fn.entry)!;
      // Nothing is left to the runtime but Node's own modules and what the function copies.
      const leftOut = bundle.externalImports.filter((name) => !builtinModules.includes(name.replace(/^node:/, "")));
      expect(
        leftOut.filter((name) => !fn.external.includes(name)),
        fn.entry,
      ).toEqual([]);
      clients.set(fn.entry, clientsOf(bundle));
    }
    expect(Object.fromEntries(clients)).toEqual(
      Object.fromEntries([...clients.keys()].map((entry) => [entry, expectedClients(entry)])),
    );
    // A plain route carries DynamoDB's client only; the OpenAPI and not-found routers none.
    expect(clients.get("functions/http/get-me.ts")).toEqual(["@aws-sdk/client-dynamodb", "@aws-sdk/lib-dynamodb"]);
    expect(clients.get("functions/http/get-openapi.ts")).toEqual([]);
    // Node resolves the one installed copy of each package, which `npm ci` installs from the lockfile.
    for (const name of new Set([...clients.values()].flat())) {
      const installed = JSON.parse(readFileSync(join(PROJECT_ROOT, "node_modules", name, "package.json"), "utf8"));
      expect(installed.version, name).toBe(lockedVersion(name));
    }
  });

  it("bundles a route's parts as static imports in its own function only, stand-ins in the others", () => {
    // The parts a bundle holds, as modules of their own (a part reached through `import()` would be
    // here too: the check below tells the two apart).
    const partsIn = (entry: string) =>
      bundles
        .get(entry)!
        .inputs.flatMap((input) => /^functions\/adapters\/aws\/parts\/(\w+)\.ts$/.exec(input)?.[1] ?? [])
        .sort();
    for (const route of routes) {
      const fn = service.routeFunctions.get(route.name)!.function;
      expect(partsIn(fn.entry), fn.entry).toEqual(awsPartsFor(route.access));
      expect(fn.awsImports, fn.entry).toBe(awsPartsFor(route.access).length > 0 ? "parts" : "composition");
    }
    // They import every route file for its definition; `$default` answers without a composition.
    expect(partsIn("functions/http/get-openapi.ts")).toEqual([]);
    expect(partsIn(service.notFoundFunction.entry)).toEqual([]);
    const composition = "functions/adapters/aws/composition.ts";
    expect(bundles.get("functions/http/get-openapi.ts")!.inputs).toContain(composition);
    expect(bundles.get(service.notFoundFunction.entry)!.inputs).not.toContain(composition);
    // What `import()` reaches esbuild wraps in lazy initializers and keeps whole behind each
    // `export *`: the DynamoDB client's aggregated class, its 50-odd commands, waiters and
    // paginators, which a plain route never uses (about 28 ms of CPU at its cold start).
    const dynamodb = bundles
      .get("functions/http/get-me.ts")!
      .inputs.filter((input) => input.includes("/@aws-sdk/client-dynamodb/dist-es/"));
    // The client's own module is there (if the SDK's layout changes, this fails first).
    expect(dynamodb).toContainEqual(expect.stringMatching(/\/dist-es\/DynamoDBClient\.js$/));
    expect(
      dynamodb.filter((input) => /\/dist-es\/(waiters|pagination)\/|\/dist-es\/DynamoDB\.js$/.test(input)),
    ).toEqual([]);
  });

  /**
   * Functions whose bundle holds a module that uses `deps.pausedRuns` (#core/workflows,
   * workflow-runs, workflow-pauses) but whose code never reaches that use, and why. Any other such
   * function must carry the pauses part: without it, the port fails only when first used.
   */
  const NEVER_TOUCH_PAUSES: Record<string, string> = {
    "functions/http/get-workflow.ts": "reads a workflow",
    "functions/http/list-user-workflows.ts": "lists workflows",
    "functions/http/list-workspace-workflows.ts": "lists workflows",
    "functions/http/list-workflow-runs.ts": "lists runs' records",
    "functions/http/update-workflow.ts":
      "an update never removes the workflow (its rollback removes only a deployment)",
    "functions/http/get-openapi.ts": "imports routes for their definitions only",
    "functions/http/route-not-found.ts": "imports routes for their definitions only",
    "functions/internal/timer-invoker.ts": "queues a workflow's ticks; runs only sources",
    "functions/internal/source-stream-function.ts": "streams a workflow's events (a constant of workflow-runs)",
  };

  it("bundles the pauses part into every function whose code can reach deps.pausedRuns, and no other", () => {
    const PART = "functions/adapters/aws/parts/pauses.ts";
    const core = sourcesUnder(PROJECT_ROOT, ["functions/core"]);
    const users = [...core].filter(([, text]) => /\bdeps\.pausedRuns\b/.test(text)).map(([file]) => file);
    expect(users.sort()).toEqual([
      "functions/core/workflow-pauses.ts",
      "functions/core/workflow-runs.ts",
      "functions/core/workflows.ts",
    ]);
    const holding = functions
      .filter((fn) => users.some((user) => bundles.get(fn.entry)!.inputs.includes(user)))
      .map((fn) => fn.entry);
    const withPart = functions.filter((fn) => bundles.get(fn.entry)!.inputs.includes(PART)).map((fn) => fn.entry);
    expect(withPart.sort()).toEqual(holding.filter((entry) => NEVER_TOUCH_PAUSES[entry] === undefined).sort());
    // The list stays current: each function on it holds such a module.
    expect(Object.keys(NEVER_TOUCH_PAUSES).filter((entry) => !holding.includes(entry))).toEqual([]);
    expect(holding).toEqual(
      expect.arrayContaining([
        "functions/http/create-workflow.ts",
        "functions/http/delete-workflow.ts",
        "functions/internal/endpoint-function.ts",
        "functions/internal/source-runner.ts",
        "functions/internal/paused-run-dispatcher.ts",
      ]),
    );
  });

  it("takes Node's http module without importing it as an ES module, which on Node 22 loads undici", () => {
    // Its ESM facade reads every export, and Node 22's WebSocket getters on it load undici: about
    // 30 ms of a plain route's cold start there (functions/adapters/node-http.ts). The SDK's own
    // `import("node:http")` runs only for an http:// endpoint.
    for (const fn of functions) {
      expect(
        bundles.get(fn.entry)!.staticExternalImports.filter((name) => /^(node:)?http$/.test(name)),
        fn.entry,
      ).toEqual([]);
    }
    // Nor `module` in a plain route, whose facade loads Node's source map support: the `require`
    // banner and the stack traces' mapping take it with `process.getBuiltinModule`.
    expect(
      bundles.get("functions/http/get-me.ts")!.staticExternalImports.filter((name) => /^(node:)?module$/.test(name)),
    ).toEqual([]);
  });

  it("maps stack traces in every bundle itself, and runs no function with --enable-source-maps", () => {
    // Node's option parsed the bundle's whole map at every cold start; the bundles map a stack
    // when it is formatted (functions/adapters/aws/lambda-stack-traces.ts, lambda-stack-traces.test.ts).
    for (const fn of functions) {
      expect(bundles.get(fn.entry)!.inputs, fn.entry).toEqual(
        expect.arrayContaining(["functions/adapters/aws/lambda-stack-traces.ts", "runtime-layer/lazy-source-maps.ts"]),
      );
      const cfn = fn.lambdaFunction.node.defaultChild as CfnFunction;
      const props = template.findResources("AWS::Lambda::Function")[Stack.of(cfn).getLogicalId(cfn)]?.Properties;
      expect(props?.Environment?.Variables?.NODE_OPTIONS, fn.entry).toBeUndefined();
    }
  });

  it("carries none of the SDK's event stream support, which only import() reached", () => {
    // The stand-in refuses it (functions/adapters/aws/no-event-streams.ts); with the real module, 150-odd
    // of @smithy/core's modules were wrapped in lazy initializers in a plain route's bundle.
    for (const fn of functions) {
      expect(
        bundles
          .get(fn.entry)!
          .inputs.filter((input) => input.includes("/@smithy/core/dist-es/submodules/event-streams/")),
        fn.entry,
      ).toEqual([]);
    }
  });

  it("leaves zod's locales out of every bundle but English, its default", () => {
    // `import { z } from "zod"` keeps the whole namespace, every locale (a quarter of a plain
    // route's bundle) with it; `import * as z` lets esbuild keep what is used (docs/aws.md "Cold starts").
    for (const fn of functions) {
      // The locales' index module may stay behind as an empty namespace (a few bytes).
      const locales = bundles.get(fn.entry)!.inputs.filter((input) => /\/zod\/v4\/locales\/(?!index\.js$)/.test(input));
      expect(locales, fn.entry).toEqual(locales.length ? [expect.stringMatching(/\/zod\/v4\/locales\/en\.js$/)] : []);
    }
  });

  it("gives the SDK clients the environment's credentials, without the rest of the default chain", () => {
    // Lambda puts the role's credentials in the environment; the chain's other links (profiles,
    // SSO, web identity, metadata) and the STS and SSO clients they carry were parsed at every
    // cold start for nothing (functions/adapters/aws/lambda-credentials.ts).
    for (const fn of functions) {
      const { sdkPackages } = bundles.get(fn.entry)!;
      if (!sdkPackages.some((name) => name.startsWith("@aws-sdk/client-"))) continue;
      expect(
        sdkPackages.filter((name) => /credential-provider|nested-clients|token-providers/.test(name)),
        fn.entry,
      ).toEqual(["@aws-sdk/credential-provider-env"]);
    }
  });

  /** The asset directory of an L1 resource of the sample stack, from the asset hash its S3 key carries. */
  function assetDirOf(construct: IConstruct, type: string, property: "Code" | "Content"): string {
    const cfn = construct.node.defaultChild as CfnElement;
    const props = sampleTemplate.findResources(type)[Stack.of(cfn).getLogicalId(cfn)]?.Properties;
    expect(props?.[property]?.S3Key).toMatch(/^[0-9a-f]{64}\.zip$/);
    return join(cdkApp.outdir, `asset.${props[property].S3Key.replace(/\.zip$/, "")}`);
  }

  it("puts the runtime in the layer at nodejs/sluice-runtime.mjs, where source functions import it from", async () => {
    const dir = assetDirOf(layer, "AWS::Lambda::LayerVersion", "Content");
    expect(readdirSync(dir)).toEqual(["nodejs"]);
    expect(readdirSync(join(dir, "nodejs"))).toEqual(["sluice-runtime.mjs"]);
    expect(`/opt/${RUNTIME_LAYER_FILE}`).toBe(RUNTIME_LAYER_MODULE);
    const runtime = await import(pathToFileURL(join(dir, RUNTIME_LAYER_FILE)).href);
    expect(typeof runtime.createSourceHandler).toBe("function");
  });

  it("bundles the describer's handler and the sandbox program it forks side by side", () => {
    const dir = assetDirOf(describer, "AWS::Lambda::Function", "Code");
    expect(readdirSync(dir).sort()).toEqual(["index.mjs", "sandbox-entry.mjs"]);
    expect(readFileSync(join(dir, "index.mjs"), "utf8")).toContain("sandbox-entry.mjs");
  });

  it("gives deploying routes esbuild with the native binary of the declared architecture, and esbuild-wasm", async () => {
    const fn = service.routeFunctions.get("create-source")!.function;
    const { dir } = bundleOf(fn);
    const own = fn.lambdaFunction.node.defaultChild as CfnFunction;
    const declared =
      template.findResources("AWS::Lambda::Function")[Stack.of(own).getLogicalId(own)]?.Properties.Architectures;
    expect(declared).toEqual([LAMBDA_ESBUILD_TARGET.arch]);
    const modules = join(dir, "node_modules");
    const esbuildVersion = JSON.parse(readFileSync(join(modules, "esbuild", "package.json"), "utf8")).version;
    expect(existsSync(join(modules, "esbuild", "lib", "main.js"))).toBe(true);
    expect(existsSync(join(modules, "esbuild-wasm", "package.json"))).toBe(true);
    // The binary: an executable ELF for AArch64 (e_machine 0xB7) at the version of the esbuild beside it.
    const binary = esbuildBinaryPath(modules, LAMBDA_ESBUILD_TARGET);
    const header = readFileSync(binary).subarray(0, 20);
    expect(header.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
    expect(header.readUInt16LE(18)).toBe({ arm64: 0xb7, x64: 0x3e }[LAMBDA_ESBUILD_TARGET.arch]);
    expect(statSync(binary).mode & 0o111).not.toBe(0);
    expect(JSON.parse(readFileSync(join(modules, LAMBDA_ESBUILD_PACKAGE, "package.json"), "utf8")).version).toBe(
      esbuildVersion,
    );
    // The function's entry chooses esbuild through that selection (native-esbuild.test.ts runs it).
    expect(readFileSync(join(dir, "index.mjs"), "utf8")).toContain("bundling components with native esbuild");
    // The selection, run on this asset's node_modules here: Lambda's binary does not run on this
    // machine unless it is arm64 Linux, and then it is chosen; this machine's own binary, put
    // beside it, is chosen by the same code (Lambda's case, on another architecture).
    const here = { platform: process.platform, arch: process.arch };
    const lambdaChoice = await chooseEsbuild(modules, LAMBDA_ESBUILD_TARGET);
    if (here.platform === "linux" && here.arch === LAMBDA_ESBUILD_TARGET.arch) {
      expect(lambdaChoice).toMatchObject({ flavour: "native" });
    } else {
      expect(lambdaChoice).toMatchObject({ flavour: "wasm", reason: expect.stringContaining("does not run here") });
      const task = mkdtempSync(join(tmpdir(), "sluice-task-"));
      try {
        cpSync(join(modules, "esbuild"), join(task, "node_modules", "esbuild"), { recursive: true });
        const ownBinary = esbuildBinaryPath(join(task, "node_modules"), here);
        mkdirSync(join(ownBinary, ".."), { recursive: true });
        cpSync(esbuildBinaryPath(join(PROJECT_ROOT, "node_modules"), here), ownBinary);
        expect(await chooseEsbuild(join(task, "node_modules"), here)).toMatchObject({
          flavour: "native",
          binary: ownBinary,
        });
      } finally {
        rmSync(task, { recursive: true, force: true });
      }
    }
  });

  it("gives deploying routes the registry and the shipped npm packages, enough to bundle @pipedream/platform", async () => {
    const { dir } = bundleOf(service.routeFunctions.get("create-source")!.function);
    expect(existsSync(join(dir, "registry", "components", "http", "sources", "new-requests", "new-requests.mjs"))).toBe(
      true,
    );
    expect(existsSync(join(dir, "node_modules", "@pipedream", "platform", "package.json"))).toBe(true);
    // As the composition root bundles on AWS, from the function's own node_modules alone (copied
    // out of the project, whose node_modules would otherwise stand in for a missing dependency).
    const task = mkdtempSync(join(tmpdir(), "sluice-task-"));
    try {
      cpSync(join(dir, "node_modules"), join(task, "node_modules"), { recursive: true });
      const bundle = await bundleComponent(
        'import { axios } from "@pipedream/platform";\nexport default { name: "x", async run() { return typeof axios; } };',
        {
          esbuild: await loadEsbuild("native"),
          resolveDir: task,
          plugins: [npmPackagesPlugin({ shippedPackagesDir: join(task, "node_modules"), cacheDir: join(task, "npm") })],
        },
      );
      expect(existsSync(join(task, "npm")), "tried to install a package").toBe(false);
      writeFileSync(join(task, "component.mjs"), bundle);
      const component = (await import(pathToFileURL(join(task, "component.mjs")).href)).default;
      expect(await component.run()).toBe("function");
      // The npm carried runs from the copy alone, as the composition root starts it on Lambda.
      const npmVersion = execFileSync(process.execPath, [bundledNpmCli(join(task, "node_modules")), "--version"], {
        env: { PATH: process.env.PATH, HOME: task },
        encoding: "utf8",
      });
      expect(npmVersion.trim()).toBe(
        JSON.parse(readFileSync(join(PROJECT_ROOT, "node_modules", "npm", "package.json"), "utf8")).version,
      );
    } finally {
      rmSync(task, { recursive: true, force: true });
    }
  });

  it("runs the bundled $default function, which answers an unrouted request with a JSON 404", () => {
    const result = invoke(bundleOf(service.notFoundFunction), "GET", "/v1/nowhere");
    expect(result.statusCode).toBe(404);
    expect(JSON.parse(result.body)).toEqual({ error: expect.stringContaining("/v1/nowhere") });
  });

  it("runs the bundled openapi function with only the environment the stack gives it", () => {
    const result = invoke(bundleOf(service.routeFunctions.get("get-openapi")!.function), "GET", "/v1/openapi.json");
    expect(result.statusCode, result.body).toBe(200);
    expect(JSON.parse(result.body)).toMatchObject({ openapi: expect.stringMatching(/^3\.1/) });
  });
});
