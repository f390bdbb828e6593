/**
 * Workflows in `ProcessPoolHost` (docs/design/workflows.md §3.2): real sandbox children under
 * Node's permission model, nothing mocked. A pool of children per workflow, never shared with
 * another workflow or a source; step modules bundled alone and linked into the workflow's folder,
 * the only one its children read; whatever a step does to its child (a synchronous loop, a forged
 * line on the result pipe, huge exports) stays its own run's.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import type { SourceCode, WorkflowCode } from "#core/ports/component-host";
import { sha256Hex } from "#core/sha256";
import type { Json, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { isAlive, realPathForChild, withPoolHost } from "../support/pool-host.ts";
import { WORKFLOW_TEST_LIMITS, workflowCode, workflowRun } from "../support/workflow-code.ts";

let workDir: string;
let host: ProcessPoolHost;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), "sluice-wf-pool-"));
  host = new ProcessPoolHost({ workDir, heapMb: 64 });
});

afterAll(async () => {
  await host.close();
  rmSync(workDir, { recursive: true, force: true });
});

/** A step whose `run({ steps, $ })` is `body`. */
const step = (body: string, imports = "") =>
  `${imports}\nexport default defineComponent({ async run({ steps, $ }) { ${body} } });`;

/** Sends its child's pid (as `$.send.emit`), after waiting `steps.trigger.event.wait` ms if given. */
const PID_STEP = step(`
  if (steps.trigger.event.wait) await new Promise((resolve) => setTimeout(resolve, steps.trigger.event.wait));
  $.send.emit({ raw_event: process.pid });
`);

const raw = (result: WorkflowResult): Json[] =>
  result.sends.flatMap((send) => (send.type === "emit" ? [send.raw_event] : []));

async function run(
  on: ProcessPoolHost,
  workflow: WorkflowCode,
  event: unknown = {},
  overrides: Partial<WorkflowInvocation> = {},
): Promise<WorkflowResult> {
  return on.invokeWorkflow(workflow, workflowRun(workflow, event, overrides));
}

/** The pid a run of `workflow` sent (its only number), checking that every step succeeded. */
async function pidOf(on: ProcessPoolHost, workflow: WorkflowCode, event: unknown = {}): Promise<number> {
  const result = await run(on, workflow, event);
  expect(result.error).toBeUndefined();
  expect(result.steps.map((outcome) => outcome.status)).toEqual(workflow.steps.map(() => "success"));
  return raw(result).find((value) => typeof value === "number") as number;
}

describe("ProcessPoolHost workflows: isolation", () => {
  it("never runs two workflows in one child, however many runs of each are in flight", async () => {
    await withPoolHost({ processes: 2 }, async (own) => {
      const one = workflowCode("p_isolated_one", [PID_STEP]);
      const two = workflowCode("p_isolated_two", [PID_STEP]);
      const results = await Promise.all(
        [one, two, one, two, one, two].map((workflow) => run(own, workflow, { wait: 200 })),
      );
      const pids = (index: number) => new Set(results.filter((_, n) => n % 2 === index).flatMap(raw));
      const [ofOne, ofTwo] = [pids(0), pids(1)];
      expect(ofOne.size).toBeGreaterThan(0);
      expect(ofTwo.size).toBeGreaterThan(0);
      expect([...ofOne].filter((pid) => ofTwo.has(pid))).toEqual([]);
      expect(new Set(own.workflowPidsOf("p_isolated_one"))).toEqual(ofOne);
      expect(new Set(own.workflowPidsOf("p_isolated_two"))).toEqual(ofTwo);
    });
  });

  it("never runs a workflow and a source in one child, even under one id", async () => {
    await withPoolHost({}, async (own) => {
      const code = "export default { async run() { this.$emit(process.pid); } };";
      const source: SourceCode = { sourceId: "p_shared_id", ownerId: "o_owner", code, codeHash: sha256Hex(code) };
      const workflow = workflowCode("p_shared_id", [PID_STEP]);
      const [sourceResult, workflowPid] = await Promise.all([
        own.invoke(source, {
          invocationId: "inv_source",
          kind: "run",
          sourceId: source.sourceId,
          props: {},
          propTypes: {},
          db: {},
          timeoutMs: 10_000,
        }),
        pidOf(own, workflow),
      ]);
      const sourcePid = sourceResult.emits[0]?.event;
      expect(typeof sourcePid).toBe("number");
      expect(workflowPid).not.toBe(sourcePid);
      expect(own.pidsOf("p_shared_id")).toEqual([sourcePid]);
      expect(own.workflowPidsOf("p_shared_id")).toEqual([workflowPid]);
    });
  });

  it("lets a step read its own workflow's modules only: not another workflow's, a source's, or the shared builds", async () => {
    const other = workflowCode("p_peeked", [step(`return 1;`)]);
    const source: SourceCode = {
      sourceId: "dc_peeked",
      ownerId: "o_owner",
      code: "export default { run() {} };",
      codeHash: sha256Hex("export default { run() {} };"),
    };
    await host.prepareWorkflow(other);
    await host.prepare(source);
    const otherStep = other.steps[0]?.codeHash as string;
    const paths = [
      ...findFiles(join(workDir, "workflows", "p_peeked")),
      join(workDir, "sources", "dc_peeked", source.codeHash, "component.mjs"),
      join(workDir, "describe", otherStep, "component.mjs"),
    ];
    // The step module and its source map, the source's bundle, the shared build.
    expect(paths.map((path) => existsSync(path))).toEqual([true, true, true, true]);
    const peeker = workflowCode("p_peeker", [
      step(
        `const read = (path) => { try { readFileSync(path); return "read"; } catch (error) { return error.code; } };
        $.send.emit({ raw_event: [read(fileURLToPath(import.meta.url)), ...${JSON.stringify(paths.map(realPathForChild))}.map(read)] });`,
        'import { readFileSync } from "node:fs"; import { fileURLToPath } from "node:url";',
      ),
    ]);
    const result = await run(host, peeker);
    expect(result.steps[0]?.error).toBeUndefined();
    expect(raw(result)).toEqual([
      ["read", "ERR_ACCESS_DENIED", "ERR_ACCESS_DENIED", "ERR_ACCESS_DENIED", "ERR_ACCESS_DENIED"],
    ]);
  });
});

/** The files below `dir` (a workflow's step modules). */
function findFiles(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[])
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile());
}

describe("ProcessPoolHost workflows: bundles", () => {
  it("links each step module into workflows/<id>/<hash of the step hashes>/steps/, builds it once, and removes the folder with the workflow", async () => {
    const first = step(`return "a";`);
    const second = step(`return "b";`);
    // Two steps share a module: it is bundled and linked once.
    const workflow = workflowCode("p_layout", [first, second, first]);
    await host.prepareWorkflow(workflow);
    const hashes = [sha256Hex(first), sha256Hex(second)];
    const folder = join(workDir, "workflows", "p_layout", sha256Hex([...hashes].sort().join("\n")), "steps");
    // Each with its source map beside it.
    expect(findFiles(join(workDir, "workflows", "p_layout")).sort()).toEqual(
      hashes.flatMap((hash) => [join(folder, `${hash}.mjs`), join(folder, `${hash}.mjs.map`)]).sort(),
    );
    // A hard link to the shared build, not a copy.
    for (const hash of hashes) {
      expect(statSync(join(folder, `${hash}.mjs`)).ino).toBe(
        statSync(join(workDir, "describe", hash, "component.mjs")).ino,
      );
    }
    // Prepared again by a new host (a restart) after the shared builds were swept: nothing is rebuilt.
    rmSync(join(workDir, "describe", hashes[0] as string), { recursive: true });
    const restarted = new ProcessPoolHost({ workDir, heapMb: 64 });
    try {
      await restarted.prepareWorkflow(workflow);
      expect(existsSync(join(workDir, "describe", hashes[0] as string))).toBe(false);
      const result = await run(restarted, workflow);
      expect(result.steps.map((outcome) => outcome.status)).toEqual(["success", "success", "success"]);
      const pid = restarted.workflowPidsOf("p_layout")[0] as number;
      expect(isAlive(pid)).toBe(true);
      await restarted.removeWorkflow(workflow);
      expect(existsSync(join(workDir, "workflows", "p_layout"))).toBe(false);
      await expect.poll(() => isAlive(pid), { timeout: 10_000 }).toBe(false);
      // A run of the removed workflow fails, as a deleted Lambda function's would, and writes nothing.
      const again = await run(restarted, workflow);
      expect(again.error).toMatchObject({ name: "SandboxError", message: "the workflow was removed" });
      expect(again.steps).toEqual([]);
      expect(existsSync(join(workDir, "workflows", "p_layout"))).toBe(false);
      await expect(restarted.prepareWorkflow(workflow)).rejects.toMatchObject({ code: "not_found" });
    } finally {
      await restarted.close();
    }
  });

  it("loads each step module once per child, by code hash: across steps, runs and deployments", async () => {
    // Each evaluation of the module counts itself on a global of the child.
    const counted = `globalThis.loads = (globalThis.loads ?? 0) + 1;
      export default defineComponent({ async run({ $ }) { $.send.emit({ raw_event: globalThis.loads }); } });`;
    const deployed = workflowCode("p_loads", [counted, counted]);
    const first = await run(host, deployed);
    const second = await run(host, deployed);
    // A new deployment (another step set, so another folder) that keeps the module.
    const redeployed = workflowCode("p_loads", [counted, step(`return 2;`), counted]);
    const third = await run(host, redeployed);
    expect([raw(first), raw(second), raw(third)]).toEqual([
      [1, 1],
      [1, 1],
      [1, 1],
    ]);
    expect(host.workflowPidsOf("p_loads")).toHaveLength(1);
  });

  it("fails a run with a CompileError when a step no longer builds, and refuses it at prepare", async () => {
    const broken = workflowCode("p_broken", [step(`return 1;`), "export default defineComponent({ run( {"]);
    await expect(host.prepareWorkflow(broken)).rejects.toMatchObject({
      message: expect.stringMatching(/^component_code: /),
    });
    const result = await run(host, broken);
    expect(result).toMatchObject({ steps: [], sends: [], logs: [], error: { name: "CompileError" } });
  });
});

describe("ProcessPoolHost workflows: what a step does to its child", () => {
  it("kills a synchronous endless loop as the run's TimeoutError, runs its neighbour again elsewhere, and the next run works in a new child", async () => {
    const workflow = workflowCode("p_loop", [
      step(`$.send.emit({ raw_event: "first" });`),
      step(`
        if (steps.trigger.event.wait) await new Promise((resolve) => setTimeout(resolve, steps.trigger.event.wait));
        while (steps.trigger.event.loop) {}
        $.send.emit({ raw_event: process.pid });
      `),
    ]);
    const before = await pidOf(host, workflow);
    // A run of the same workflow in the same child, waiting while the loop blocks it.
    const waiting = run(host, workflow, { wait: 1500 }, { timeoutMs: 20_000 });
    const looped = await run(host, workflow, { loop: true }, { timeoutMs: 500 });
    const waited = await waiting;
    expect(waited.error).toBeUndefined();
    expect(waited.steps.map((outcome) => outcome.status)).toEqual(["success", "success"]);
    expect(raw(waited)[1]).not.toBe(before);
    expect(looped).toEqual({
      invocationId: expect.any(String),
      steps: [],
      sends: [],
      logs: [],
      error: { name: "TimeoutError", message: expect.stringContaining("0.5s"), ts: expect.any(Number) },
      durationMs: expect.any(Number),
    });
    await expect.poll(() => isAlive(before), { timeout: 10_000 }).toBe(false);
    const after = await run(host, workflow);
    expect(after.error).toBeUndefined();
    expect(raw(after)).toEqual(["first", expect.any(Number)]);
    expect(raw(after)[1]).not.toBe(before);
  });

  it("ends a first step that blocks at once, among runs sent in the same turn, as its TimeoutError; no run outlasts its limit", async () => {
    const workflow = workflowCode("p_first_loop", [
      step(`
        while (steps.trigger.event.loop) {}
        $.send.emit({ raw_event: process.pid });
      `),
    ]);
    const before = await pidOf(host, workflow);
    // Sent in one turn, so the child reads them as one batch and says `started` for all of them in
    // one write, before any step code runs; the blocking one runs first.
    const [looped, ...others] = await Promise.all([
      run(host, workflow, { loop: true }, { timeoutMs: 500 }),
      run(host, workflow, {}, { timeoutMs: 2000 }),
      run(host, workflow, {}, { timeoutMs: 2000 }),
    ]);
    expect(looped?.error).toMatchObject({ name: "TimeoutError" });
    // All three had started when the loop blocked, so the host's suspect (the last started, a
    // guess: docs/design/workflows.md) may be a neighbour, which then ends at its own limit. The
    // others ran again elsewhere.
    for (const other of others) {
      if (other.error) expect(other.error.name).toMatch(/TimeoutError|SandboxError/);
      else expect(raw(other)).toEqual([expect.any(Number)]);
    }
    await expect.poll(() => isAlive(before), { timeout: 10_000 }).toBe(false);
  });

  it("ignores a forged result line for another workflow's run or a made-up one: both runs keep their own results", async () => {
    const forgeLine = (invocationId: string) =>
      `JSON.stringify({ type: "result", result: { invocationId: ${invocationId}, steps: [], sends: [{ type: "emit", raw_event: "forged" }], logs: [], durationMs: 1 } }) + "\\n"`;
    const forger = workflowCode("p_forger", [
      step(
        `for (const id of steps.trigger.event.forge) writeSync(4, ${forgeLine("id")}); $.send.emit({ raw_event: process.pid });`,
        'import { writeSync } from "node:fs";',
      ),
    ]);
    const victim = workflowCode("p_victim", [PID_STEP]);
    const forgerPid = await pidOf(host, forger, { forge: [] });
    const victimRun = workflowRun(victim, { wait: 1000 });
    const victimResult = host.invokeWorkflow(victim, victimRun);
    const forged = await run(host, forger, { forge: [victimRun.invocationId, "wf_made_up"] });
    expect(forged.error).toBeUndefined();
    expect(raw(forged)).toEqual([forgerPid]);
    const genuine = await victimResult;
    expect(genuine.error).toBeUndefined();
    expect(raw(genuine)).toEqual([expect.any(Number)]);
    expect(raw(genuine)[0]).not.toBe(forgerPid);
    // The forger's child was not punished for lines about runs it does not hold: it still serves.
    expect(await pidOf(host, forger, { forge: [] })).toBe(forgerPid);
  });

  it("refuses a forged result of the wrong shape for the step's own run: the run fails, nothing of it applied", async () => {
    // A source's result shape, for its own run id: well-formed for a source, not for a workflow.
    const forger = workflowCode("p_own_forger", [
      step(
        `writeSync(4, JSON.stringify({ type: "result", result: { invocationId: steps.trigger.event.self, emits: [{ event: "forged" }], dbWrites: {}, logs: [], durationMs: 1 } }) + "\\n");
        $.send.emit({ raw_event: "genuine" });
        await new Promise((resolve) => setTimeout(resolve, 200));`,
        'import { writeSync } from "node:fs";',
      ),
    ]);
    const invocation = workflowRun(forger);
    invocation.trigger = { event: { self: invocation.invocationId }, context: {} };
    const result = await host.invokeWorkflow(forger, invocation);
    expect(result).toEqual({
      invocationId: invocation.invocationId,
      steps: [],
      sends: [],
      logs: [],
      error: {
        name: "SandboxError",
        message: expect.stringContaining("malformed result (steps must be an array)"),
        ts: expect.any(Number),
      },
      durationMs: expect.any(Number),
    });
  });

  it("keeps huge exports in the child: later steps read them, the result carries only their size", async () => {
    await withPoolHost({ heapMb: 256 }, async (own) => {
      // 3 × 8 MB exported: together over the channel's 16 MiB, far over what a result may carry.
      const workflow = workflowCode("p_huge", [
        step(`for (const name of ["a", "b", "c"]) $.export(name, name.repeat(8_000_000));`),
        step(`$.send.emit({ raw_event: steps.s1.a.length + steps.s1.b.length + steps.s1.c.length });`),
      ]);
      const result = await run(
        own,
        workflow,
        {},
        { limits: { ...WORKFLOW_TEST_LIMITS, maxExportBytes: 32 * 1024 * 1024 } },
      );
      expect(result.error).toBeUndefined();
      expect(result.steps.map((outcome) => [outcome.status, outcome.exportBytes])).toEqual([
        ["success", 3 * 8_000_002],
        ["success", 0],
      ]);
      expect(raw(result)).toEqual([24_000_000]);
      expect(JSON.stringify(result).length).toBeLessThan(2000);
    });
  });
});
