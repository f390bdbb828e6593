/**
 * Runs a workflow's Lambda code as Sluice deploys it, in plain Node processes fed Lambda-shaped
 * events: the runtime layer (as the service stack bundles it) under a workflow function's zip (as
 * `LambdaComponentHost.prepareWorkflow` uploads it: `steps/<hash>.mjs` and an `index.mjs` calling
 * `createWorkflowHandler`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleComponent, type EsbuildApi, loadEsbuild } from "#adapters/aws/source-bundle";
import { workflowZip } from "#adapters/aws/workflow-bundle";
import type { WorkflowCode } from "#core/ports/component-host";
import type { WorkflowResult } from "#runtime/protocol";
import { buildRuntimeLayer, invokeInProcess, unpackFunction } from "../support/lambda-process.ts";
import { workflowCode, workflowRun } from "../support/workflow-code.ts";

const WORKFLOW_ID = "p_01kab00000abcdefghjkmn";

const STEPS = [
  // Counts its own evaluations in the process: a module is loaded once, however many runs use it.
  `globalThis.loads = (globalThis.loads ?? 0) + 1;
  const loadsNow = globalThis.loads;
  export default defineComponent({
    async run({ steps, $ }) {
      $.export("doubled", steps.trigger.event.n * 2);
      return { loads: loadsNow, key: process.env.AWS_ACCESS_KEY_ID ?? null, workflow: process.env.PD_COMPONENT };
    },
  });`,
  `import { format } from "node:util";
  export default defineComponent({
    async run({ steps, $ }) {
      $.send.emit({ raw_event: { ...steps.s1.$return_value, text: format("doubled %d", steps.s1.doubled) } });
    },
  });`,
  `// line 1
  export default defineComponent({
    async run({ steps }) {
      if (steps.trigger.event.fail) throw new RangeError("third step failed"); // line 4
      console.log("third ran");
    },
  });`,
];

let esbuild: EsbuildApi;
let work: string;
let layerUrl: string;
let workflow: WorkflowCode;
let handlerFile: string;

/** The function's zip of `workflow`'s modules, each bundled as `prepareWorkflow` bundles it. */
async function zipOf(code: WorkflowCode) {
  const modules = [];
  for (const step of code.steps) {
    modules.push({ codeHash: step.codeHash, bundle: await bundleComponent(step.code, { esbuild }) });
  }
  return workflowZip(modules, layerUrl);
}

const invoke = (events: unknown[], env: Record<string, string> = {}) =>
  invokeInProcess(handlerFile, events, { functionName: `sluice-e2e-${WORKFLOW_ID}`, env });

beforeAll(async () => {
  esbuild = await loadEsbuild("native");
  work = mkdtempSync(join(tmpdir(), "sluice-workflow-bundle-"));
  // The layer as the stack builds it; unpacked by Lambda under /opt, here under <work>/opt.
  layerUrl = buildRuntimeLayer(work);
  workflow = workflowCode(WORKFLOW_ID, STEPS);
  handlerFile = unpackFunction((await zipOf(workflow)).zip, join(work, "task"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("a workflow function's bundle on the runtime layer", () => {
  it("gives the same zip for the same modules, whatever the order of the steps", async () => {
    const reordered = workflowCode(WORKFLOW_ID, [STEPS[2], STEPS[0], STEPS[1], STEPS[0]] as string[]);
    const [first, second] = [await zipOf(workflow), await zipOf(reordered)];
    expect(Buffer.from(second.zip).equals(Buffer.from(first.zip))).toBe(true);
  });

  it("runs each run's steps in order, loading each module once per process, without the role's credentials", async () => {
    const [first, second] = (await invoke(
      [workflowRun(workflow, { n: 20 }), workflowRun(workflow, { n: 1, fail: true })],
      { AWS_ACCESS_KEY_ID: "AKIAFAKE", AWS_SECRET_ACCESS_KEY: "secret", AWS_SESSION_TOKEN: "token" },
    )) as WorkflowResult[];

    expect(first?.error).toBeUndefined();
    expect(first?.steps.map((step) => [step.id, step.status])).toEqual([
      ["c_s1", "success"],
      ["c_s2", "success"],
      ["c_s3", "success"],
    ]);
    expect(first?.sends).toEqual([
      { type: "emit", raw_event: { loads: 1, key: null, workflow: WORKFLOW_ID, text: "doubled 40" } },
    ]);
    expect(first?.logs).toEqual([{ ts: expect.any(Number), level: "log", message: "third ran", step: "c_s3" }]);

    // The second run uses the modules the first loaded; its third step's error is that step's.
    expect(second?.sends).toEqual([
      { type: "emit", raw_event: { loads: 1, key: null, workflow: WORKFLOW_ID, text: "doubled 2" } },
    ]);
    expect(second?.steps.map((step) => step.status)).toEqual(["success", "success", "error"]);
    expect(second?.steps[2]?.error).toMatchObject({ name: "RangeError", message: "third step failed" });
    expect(second?.steps[2]?.error?.stack).toMatch(/component\.ts:4:\d+/);
  });

  it("runs an action on its own (the Connect run action): its values come back, and $.send.* throws", async () => {
    const first = workflowRun(workflow, { n: 4 });
    const [alone] = (await invoke([
      { ...first, steps: first.steps.slice(0, 2), standalone: true },
    ])) as WorkflowResult[];
    // The failed step's exports too (it made none).
    expect(alone?.values).toEqual({
      s1: { doubled: 8, $return_value: { loads: 1, key: null, workflow: WORKFLOW_ID } },
      s2: {},
    });
    expect(alone?.steps[1]?.error).toMatchObject({
      name: "NotImplementedError",
      message: expect.stringContaining("$.send.emit: an action run on its own"),
    });
    expect(alone?.sends).toEqual([]);
  });

  it("fails a step whose module is not in the function with a LoadError, and runs the next run", async () => {
    const other = workflowCode(WORKFLOW_ID, ["export default defineComponent({ run() {} });"]);
    const [missing, next] = (await invoke([
      workflowRun(workflow, { n: 1 }, { steps: [...workflowRun(other).steps] }),
      workflowRun(workflow, { n: 3 }),
    ])) as WorkflowResult[];
    expect(missing?.steps).toEqual([expect.objectContaining({ id: "c_s1", status: "error" })]);
    expect(missing?.steps[0]?.error).toMatchObject({
      name: "LoadError",
      message: expect.stringContaining("no step module"),
    });
    expect(next?.steps.map((step) => step.status)).toEqual(["success", "success", "success"]);
  });

  it("fails the step whose stray promise rejects with that error, and serves the next run", async () => {
    const stray = workflowCode(WORKFLOW_ID, [
      `export default defineComponent({
        async run({ steps, $ }) {
          if (steps.trigger.event.stray) Promise.reject(new Error("nobody caught this"));
          await new Promise((resolve) => setTimeout(resolve, 200));
          $.send.emit({ raw_event: "finished" });
        },
      });`,
    ]);
    const strayHandler = unpackFunction((await zipOf(stray)).zip, join(work, "stray"));
    const [failed, next] = (await invokeInProcess(
      strayHandler,
      [workflowRun(stray, { stray: true }), workflowRun(stray, {})],
      { functionName: `sluice-e2e-${WORKFLOW_ID}` },
    )) as WorkflowResult[];
    expect(failed?.steps).toEqual([expect.objectContaining({ id: "c_s1", status: "error" })]);
    expect(failed?.steps[0]?.error).toMatchObject({ message: "nobody caught this" });
    expect(failed?.sends).toEqual([]);
    expect(next?.steps.map((step) => step.status)).toEqual(["success"]);
    expect(next?.sends).toEqual([{ type: "emit", raw_event: "finished" }]);
  });

  it("refuses an event that is not a workflow invocation as a function error (a bug of the host)", async () => {
    const [refused, source] = await invoke([{ hello: "world" }, { invocationId: "inv-1", kind: "run" }]);
    expect(refused).toEqual({ thrown: expect.stringMatching(/^invalid workflow invocation: /) });
    expect(source).toEqual({ thrown: expect.stringMatching(/^invalid workflow invocation: /) });
  });
});
