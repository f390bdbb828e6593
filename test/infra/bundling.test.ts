import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { App, type CfnElement, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { CfnFunction } from "aws-cdk-lib/aws-lambda";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleComponent, loadEsbuild, RUNTIME_LAYER_MODULE } from "#adapters/aws/source-bundle";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { bundledNpmCli } from "#adapters/npm/npm-cli";
import { ESM_REQUIRE_BANNER, PROJECT_ROOT, type SluiceFunction } from "../../lib/constructs/sluice-function.ts";
import { RUNTIME_LAYER_FILE } from "../../lib/constructs/source-compute.ts";
import { ServiceStack } from "../../lib/service-stack.ts";
import { StatefulStack } from "../../lib/stateful-stack.ts";

// Skips the CloudFormation validation plugin; bundling still runs.
process.env.CDK_VALIDATION = "false";

interface BundledFunction {
  dir: string;
  environment: Record<string, unknown>;
}

/**
 * Invokes a bundle's `handler` in a fresh Node process that has only the function's environment
 * from the template, as on Lambda. Imports left external (`@aws-sdk/*`) resolve from the project's
 * node_modules, standing in for the runtime's.
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

describe("ServiceStack bundling", () => {
  let app: App;
  let service: ServiceStack;
  let template: Template;

  beforeAll(() => {
    // Inside the project (cdk.out is ignored by git), so the bundles' external imports resolve.
    mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
    const outdir = mkdtempSync(join(PROJECT_ROOT, "cdk.out", "infra-test-"));
    // Default context: every function is bundled with the local esbuild, as `cdk synth` does.
    app = new App({ outdir });
    const stateful = new StatefulStack(app, "SluiceStateful");
    service = new ServiceStack(app, "SluiceService", {
      resourcesTable: stateful.resourcesTable,
      secretsKey: stateful.secretsKey,
    });
    template = Template.fromStack(service);
    // Every function is bundled here: on 2 cores with other suites running, that takes minutes.
  }, 240_000);

  afterAll(() => {
    if (app) rmSync(app.outdir, { recursive: true, force: true });
  });

  /** A function's bundle directory, named by the asset hash its S3 key carries, and its environment. */
  function bundleOf(fn: SluiceFunction): BundledFunction {
    const cfn = fn.lambdaFunction.node.defaultChild as CfnFunction;
    const props = template.findResources("AWS::Lambda::Function")[Stack.of(cfn).getLogicalId(cfn)]?.Properties;
    expect(props?.Code?.S3Key, fn.entry).toMatch(/^[0-9a-f]{64}\.zip$/);
    return {
      dir: join(app.outdir, `asset.${props.Code.S3Key.replace(/\.zip$/, "")}`),
      environment: props.Environment.Variables,
    };
  }

  it("bundles every entry into an ESM file with a source map, leaving the AWS SDK to the runtime", () => {
    const functions = [
      ...[...service.routeFunctions.values()].map((route) => route.function),
      service.notFoundFunction,
      service.sources.httpInterface,
      service.sources.sourceRunner,
      service.sources.timerInvoker,
    ];
    for (const fn of functions) {
      const { dir } = bundleOf(fn);
      const code = readFileSync(join(dir, "index.mjs"), "utf8");
      expect(code.startsWith(ESM_REQUIRE_BANNER), fn.entry).toBe(true);
      const map = JSON.parse(readFileSync(join(dir, "index.mjs.map"), "utf8")) as { sources: string[] };
      expect(
        map.sources.some((source) => source.endsWith(fn.entry)),
        fn.entry,
      ).toBe(true);
      expect(
        map.sources.some((source) => source.includes("node_modules/@aws-sdk/")),
        fn.entry,
      ).toBe(false);
    }
  });

  /** The asset directory of an L1 resource's code, from the asset hash its S3 key carries. */
  function assetDirOf(construct: IConstruct, type: string, property: "Code" | "Content"): string {
    const cfn = construct.node.defaultChild as CfnElement;
    const props = template.findResources(type)[Stack.of(cfn).getLogicalId(cfn)]?.Properties;
    expect(props?.[property]?.S3Key).toMatch(/^[0-9a-f]{64}\.zip$/);
    return join(app.outdir, `asset.${props[property].S3Key.replace(/\.zip$/, "")}`);
  }

  it("puts the runtime in the layer at nodejs/sluice-runtime.mjs, where source functions import it from", async () => {
    const dir = assetDirOf(service.sources.runtimeLayer, "AWS::Lambda::LayerVersion", "Content");
    expect(readdirSync(dir)).toEqual(["nodejs"]);
    expect(readdirSync(join(dir, "nodejs"))).toEqual(["sluice-runtime.mjs"]);
    expect(`/opt/${RUNTIME_LAYER_FILE}`).toBe(RUNTIME_LAYER_MODULE);
    const runtime = await import(pathToFileURL(join(dir, RUNTIME_LAYER_FILE)).href);
    expect(typeof runtime.createSourceHandler).toBe("function");
  });

  it("bundles the describer's handler and the sandbox program it forks side by side", () => {
    const dir = assetDirOf(service.sources.describer, "AWS::Lambda::Function", "Code");
    expect(readdirSync(dir).sort()).toEqual(["index.mjs", "sandbox-entry.mjs"]);
    expect(readFileSync(join(dir, "index.mjs"), "utf8")).toContain("sandbox-entry.mjs");
  });

  it("gives deploying routes esbuild-wasm, the registry and the shipped npm packages, enough to bundle @pipedream/platform", async () => {
    const { dir } = bundleOf(service.routeFunctions.get("create-source")!.function);
    expect(existsSync(join(dir, "node_modules", "esbuild-wasm", "package.json"))).toBe(true);
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
