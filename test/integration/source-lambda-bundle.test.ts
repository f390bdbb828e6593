/**
 * Runs the Lambda code Sluice deploys for sources, built exactly as it is deployed, in plain Node
 * processes fed Lambda-shaped events: the runtime layer (as the service stack bundles it), a
 * source function's zip (as `LambdaComponentHost.prepare` uploads it) and the describer.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleComponent, type EsbuildApi, loadEsbuild, sourceZip } from "#adapters/aws/source-bundle";
import type { Invocation, InvocationResult } from "#runtime/protocol";
import { bundleLambdaFiles } from "../../lib/constructs/esbuild-code.ts";
import { DESCRIBER_FILES } from "../../lib/constructs/source-compute.ts";
import { buildRuntimeLayer, invokeInProcess as invokeProcess, unpackFunction } from "../support/lambda-process.ts";

const SOURCE = "dc_01kab00000abcdefghjkmn";

const COMPONENT = `
// line 2
export default {
  name: "Lambda bundle test",
  version: "0.1.0",
  props: { db: "$.service.db", greeting: { type: "string" } },
  hooks: {
    async deploy() {
      throw new Error("deploy hook failed"); // line 9
    },
  },
  async run(event) {
    const count = (this.db.get("count") ?? 0) + 1;
    this.db.set("count", count);
    console.log("run", count);
    this.$emit(
      { greeting: this.greeting, event, count, component: process.env.PD_COMPONENT, key: process.env.AWS_ACCESS_KEY_ID ?? null },
      { id: "e" + count, summary: "run " + count },
    );
    if (event && event.strayRejection) Promise.reject(new Error("nobody caught this"));
    if (event && event.strayRejection) await new Promise((resolve) => setTimeout(resolve, 1000));
  },
};`;

const invocation = (overrides: Partial<Invocation>): Invocation => ({
  invocationId: "inv-1",
  kind: "run",
  sourceId: SOURCE,
  props: { greeting: "hello" },
  propTypes: { db: "$.service.db", greeting: "string" },
  db: {},
  timeoutMs: 5000,
  ...overrides,
});

/** A handler of the source's function, called in a fresh process (`invokeInProcess`). */
const invokeInProcess = (handlerFile: string, events: unknown[], env: Record<string, string> = {}) =>
  invokeProcess(handlerFile, events, { functionName: `sluice-e2e-${SOURCE}`, env });

/** Native esbuild, as on the deployer's machine; the API functions on Lambda load esbuild-wasm instead. */
let esbuild: EsbuildApi;
beforeAll(async () => {
  esbuild = await loadEsbuild("native");
});

describe("a source function's bundle on the runtime layer", () => {
  let work: string;
  let layerUrl: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "sluice-lambda-bundle-"));
    // The layer as the stack builds it; unpacked by Lambda under /opt, here under <work>/opt.
    layerUrl = buildRuntimeLayer(work);
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** Builds the function's zip and unpacks it, as Lambda does into /var/task. */
  async function deployFunction(name: string, code: string): Promise<string> {
    const { zip } = sourceZip(await bundleComponent(code, { esbuild }), layerUrl);
    return unpackFunction(zip, join(work, name));
  }

  it("runs invocations and returns their effects, without the role's credentials", async () => {
    const handler = await deployFunction("runs", COMPONENT);
    const [first, second] = (await invokeInProcess(
      handler,
      [invocation({ event: { n: 1 } }), invocation({ invocationId: "inv-2", event: { n: 2 }, db: { count: 41 } })],
      { AWS_ACCESS_KEY_ID: "AKIAFAKE", AWS_SECRET_ACCESS_KEY: "secret", AWS_SESSION_TOKEN: "token" },
    )) as InvocationResult[];
    expect(first).toMatchObject({
      invocationId: "inv-1",
      emits: [
        {
          event: { greeting: "hello", event: { n: 1 }, count: 1, component: SOURCE, key: null },
          meta: { id: "e1", summary: "run 1" },
        },
      ],
      dbWrites: { count: 1 },
      logs: [{ level: "log", message: "run 1" }],
    });
    expect(first!.error).toBeUndefined();
    expect(second).toMatchObject({ invocationId: "inv-2", dbWrites: { count: 42 }, emits: [{ meta: { id: "e42" } }] });
  });

  it("reports a failing hook with a stack that names the user's line", async () => {
    const handler = await deployFunction("hook", COMPONENT);
    const [result] = (await invokeInProcess(handler, [invocation({ kind: "deploy" })])) as InvocationResult[];
    expect(result!.error).toMatchObject({ name: "Error", message: "deploy hook failed" });
    expect(result!.error!.stack).toMatch(/component\.ts:9:\d+/);
  });

  it("ends a run with an error nobody caught as that run's error, and keeps serving", async () => {
    const handler = await deployFunction("stray", COMPONENT);
    const [failed, next] = (await invokeInProcess(handler, [
      invocation({ event: { strayRejection: true } }),
      invocation({ invocationId: "inv-2", event: {} }),
    ])) as InvocationResult[];
    expect(failed!.error).toMatchObject({ message: "nobody caught this" });
    expect(failed!.emits).toHaveLength(1);
    expect(next).toMatchObject({ invocationId: "inv-2", emits: [{ meta: { id: "e1" } }] });
    expect(next!.error).toBeUndefined();
  });

  it("answers a module that throws while loading with a LoadError result, not a Lambda error", async () => {
    const handler = await deployFunction("broken", 'throw new Error("broken at load");\nexport default {};');
    const [result] = (await invokeInProcess(handler, [invocation({})])) as InvocationResult[];
    expect(result).toMatchObject({ invocationId: "inv-1", emits: [], dbWrites: {} });
    expect(result!.error).toMatchObject({ name: "LoadError", message: expect.stringContaining("broken at load") });
  });

  it("refuses an event that is not an invocation", async () => {
    const handler = await deployFunction("refuses", COMPONENT);
    const [result] = await invokeInProcess(handler, [{ hello: "world" }]);
    expect(result).toEqual({ thrown: expect.stringMatching(/^invalid invocation: invocationId must be a string$/) });
  });
});

describe("the describer function", () => {
  let work: string;
  let handlerFile: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "sluice-describer-"));
    bundleLambdaFiles(DESCRIBER_FILES, join(work, "task"));
    handlerFile = join(work, "task", "index.mjs");
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("describes a bundled component in a sandboxed child", async () => {
    const code = await bundleComponent(COMPONENT, { esbuild });
    const [reply] = await invokeInProcess(handlerFile, [{ kind: "describe", code }]);
    expect(reply).toMatchObject({
      ok: true,
      description: { name: "Lambda bundle test", version: "0.1.0", hooks: ["deploy"], hasRun: true },
    });
  });

  it("answers code that throws while loading with the message and the user's line", async () => {
    const code = await bundleComponent('// one\n// two\nthrow new Error("no metadata for you");\nexport default {};', {
      esbuild,
    });
    const [reply] = await invokeInProcess(handlerFile, [{ kind: "describe", code }]);
    expect(reply).toMatchObject({ ok: false, error: { message: "no metadata for you", line: 3 } });
  });

  it("evaluates the code without the describer's environment and without write access", async () => {
    const code = await bundleComponent(
      `import { writeFileSync } from "node:fs";
       let wrote = "no";
       try { writeFileSync("/tmp/sluice-describer-escape", "x"); wrote = "yes"; } catch (error) { wrote = error.code; }
       export default { name: String(process.env.AWS_SECRET_ACCESS_KEY ?? "none") + "/" + wrote };`,
      { esbuild },
    );
    const [reply] = await invokeInProcess(handlerFile, [{ kind: "describe", code }], {
      AWS_SECRET_ACCESS_KEY: "describer-secret",
    });
    expect(reply).toMatchObject({ ok: true, description: { name: "none/ERR_ACCESS_DENIED" } });
  });
});
