import { describe, expect, it } from "vitest";
import type { PausedRun } from "#core/ports/paused-runs";
import { RunBusyError, type RunJob, type WorkflowRunJob } from "#core/ports/run-queue";
import { usageDay } from "#core/time";
import { checkWorkflowResult } from "#core/workflow-limits";
import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";
import {
  continuationRunId,
  countPausedBytes,
  dispatchDuePause,
  dispatchDuePauses,
  FLOW_PATH,
  keepPause,
  MAX_PAUSED_RUNS_PER_WORKFLOW,
  newFlowBase,
  receiveFlowRequest,
} from "#core/workflow-pauses";
import { runWorkflow } from "#core/workflow-runs";
import type { Json, WorkflowInvocation, WorkflowPause, WorkflowResult } from "#runtime/protocol";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

const request = (method = "POST", body = "", rawQuery = "") => ({
  method,
  path: "/",
  rawQuery,
  headers: { "content-type": "application/json" },
  body: Buffer.from(body),
  clientIp: "127.0.0.1",
  url: "http://127.0.0.1/flow",
});

/** Local stores, a run queue that records what it is given, and a pause of `run_a` as a run would keep it. */
async function setUp(kind: PausedRun["kind"] = "suspend") {
  const queued: RunJob[] = [];
  const deps = memoryDeps(Date.UTC(2026, 10, 27), { runs: { enqueue: async (job) => void queued.push(job) } });
  const urls = newFlowBase({ ...deps, runtime: { ...deps.runtime, publicUrl: "http://127.0.0.1:9/" } }, "run_a");
  const token = urls.split("/").at(-1) as string;
  const owner = await accountIn(deps, "ada");
  const step = {
    id: "c_ask",
    namespace: "ask",
    disabled: false,
    origin: "code" as const,
    componentId: "sc_1",
    configuredProps: {},
  };
  const workflow: WorkflowRecord = { ...workflowRecord(owner, "p_a"), steps: [step] };
  await deps.workflows.createWorkflow(workflow);
  const run = { id: "run_a", trigger: { type: "http", id: "hi_1" } } as WorkflowRun;
  const pause: WorkflowPause = { kind, stepId: "c_ask", afterMs: 60_000, steps: { ask: { $return_value: 1 } } };
  const refused = await keepPause(
    deps,
    workflow,
    { kind: "workflow", workflowId: "p_a", runId: "run_a", trigger: "http", triggerId: "hi_1", event: { n: 1 } },
    run,
    urls,
    pause,
    undefined,
    "k_1",
    deps.clock.nowMs(),
  );
  expect(refused).toBeUndefined();
  return { deps, queued, urls, token, workflow, run };
}

describe("a pause's URLs", () => {
  it("start with the public URL, the run id and 24 characters of secret, a new secret each time", () => {
    const deps = memoryDeps();
    const one = newFlowBase({ ...deps, runtime: { ...deps.runtime, publicUrl: "https://sluice.example/" } }, "run_x");
    const two = newFlowBase({ ...deps, runtime: { ...deps.runtime, publicUrl: "https://sluice.example" } }, "run_x");
    expect(one).toMatch(/^https:\/\/sluice\.example\/flow\/run_x\/[A-Za-z0-9_-]{24}$/);
    expect(FLOW_PATH.test(`${new URL(one).pathname}/resume`)).toBe(true);
    expect(two).not.toBe(one);
  });

  it("keep only a hash of their secret", async () => {
    const { deps, token } = await setUp();
    const stored = JSON.stringify(await deps.pausedRuns.get("run_a"));
    expect(stored).not.toContain(token);
  });
});

describe("receiveFlowRequest", () => {
  it("resumes once: the continuation is queued under a run id made from the pause and its dispatch", async () => {
    const { deps, queued, token } = await setUp();
    const answer = await receiveFlowRequest(deps, "run_a", token, "resume", request("POST", '{"ok":true}'));
    expect(answer.status).toBe(202);
    expect(JSON.parse(String(answer.body))).toEqual({ status: "resumed", run_id: "run_a" });
    const pause = (await deps.pausedRuns.get("run_a")) as PausedRun;
    expect(pause.dispatch).toMatchObject({ how: "resume", request: { method: "POST", body: { ok: true } } });
    expect(queued).toEqual([
      {
        kind: "workflow",
        workflowId: "p_a",
        runId: continuationRunId(pause, pause.dispatch as NonNullable<PausedRun["dispatch"]>),
        trigger: "http",
        triggerId: "hi_1",
        event: null,
        resume: { pauseId: "run_a" },
      },
    ]);
    // A retry is answered the same; soon after it queues nothing more (each copy would count
    // against the runs per minute), 10 minutes later the same run again (it runs once either way).
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
    deps.clock.set(deps.clock.nowMs() + 60_000);
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
    expect(queued).toHaveLength(1);
    deps.clock.set(deps.clock.nowMs() + 10 * 60_000);
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
    expect(queued[1]).toEqual(queued[0]);
    // The other URL is refused, naming what happened.
    const cancel = await receiveFlowRequest(deps, "run_a", token, "cancel", request("GET"));
    expect(cancel.status).toBe(409);
    expect(String(cancel.body)).toContain("resumed already");
    expect(queued).toHaveLength(2);
  });

  it("answers 404 to a wrong secret and an unknown run, 413 to a body over 32 KiB, 204 to a preflight: nothing is queued", async () => {
    const { deps, queued, token } = await setUp();
    expect((await receiveFlowRequest(deps, "run_a", "A".repeat(24), "resume", request())).status).toBe(404);
    expect((await receiveFlowRequest(deps, "run_b", token, "resume", request())).status).toBe(404);
    expect(
      (await receiveFlowRequest(deps, "run_a", token, "cancel", request("POST", "x".repeat(33 * 1024)))).status,
    ).toBe(413);
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request("OPTIONS"))).status).toBe(204);
    // Within 32 KiB, but control characters escape to six times as much JSON, twice (raw and parsed).
    const escaping = request("POST", "\u0001".repeat(30 * 1024));
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", escaping)).status).toBe(413);
    expect(queued).toEqual([]);
    expect((await deps.pausedRuns.get("run_a"))?.dispatch).toBeUndefined();
  });

  it("refuses a URL after the suspension's time came (it was cancelled then)", async () => {
    const { deps, queued, token } = await setUp("suspend");
    expect(await dispatchDuePause(deps, "run_a", deps.clock.nowMs() + 60_000)).toBe(true);
    const late = await receiveFlowRequest(deps, "run_a", token, "resume", request());
    expect(late.status).toBe(409);
    expect(String(late.body)).toContain("cancelled already (its time came)");
    expect(queued).toHaveLength(1);
  });
});

describe("receiveFlowRequest: what does not decide a pause", () => {
  it("answers HEAD with 204 and keeps the pause: a client checking the link decides nothing", async () => {
    const { deps, queued, token } = await setUp();
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request("HEAD"))).status).toBe(204);
    expect((await deps.pausedRuns.get("run_a"))?.dispatch).toBeUndefined();
    expect(queued).toEqual([]);
  });

  it("keeps the pause of an inactive workflow (409) until it is active again", async () => {
    const { deps, queued, token, workflow } = await setUp();
    await deps.workflows.updateWorkflow({ ...workflow, active: false });
    const refused = await receiveFlowRequest(deps, "run_a", token, "resume", request());
    expect(refused.status).toBe(409);
    expect(String(refused.body)).toContain("inactive");
    expect((await deps.pausedRuns.get("run_a"))?.dispatch).toBeUndefined();
    expect(queued).toEqual([]);
    await deps.workflows.updateWorkflow({ ...workflow, active: true });
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
  });

  it("refuses a request that went round too many deliveries (508), and carries the count on otherwise", async () => {
    const { deps, queued, token } = await setUp();
    const looped = { ...request(), headers: { "x-sluice-hops": "6" } };
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", looped)).status).toBe(508);
    expect(queued).toEqual([]);
    const once = { ...request(), headers: { "x-sluice-hops": "2" } };
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", once)).status).toBe(202);
    expect(queued[0]).toMatchObject({ hops: 2 });
  });
});

describe("what paused runs keep, in the workspace's stored bytes", () => {
  it("is added when a run pauses (the difference when it pauses again) and taken back when its continuation ends", async () => {
    const { deps, token, workflow, queued } = await setUp("suspend");
    const kept = (await deps.pausedRuns.get("run_a")) as PausedRun;
    expect(kept.stateBytes).toBe(Buffer.byteLength(JSON.stringify(kept.state)));
    expect((await deps.usage.getStored(workflow.workspaceId)).bytes).toBe(kept.stateBytes);
    // The same run paused again after a crash, with more kept: only the difference is added.
    const bigger: WorkflowPause = { kind: "suspend", stepId: "c_ask", afterMs: 1, steps: { ask: "x".repeat(500) } };
    const job = {
      kind: "workflow" as const,
      workflowId: "p_a",
      runId: "run_a",
      trigger: "http" as const,
      triggerId: "hi_1",
      event: { n: 1 },
    };
    const run = { id: "run_a", trigger: { type: "http", id: "hi_1" } } as WorkflowRun;
    const base = newFlowBase(deps, "run_a");
    expect(
      await keepPause(deps, workflow, job, run, base, bigger, undefined, "k_1", deps.clock.nowMs()),
    ).toBeUndefined();
    const again = (await deps.pausedRuns.get("run_a")) as PausedRun;
    expect(again.stateBytes).toBeGreaterThan(kept.stateBytes);
    expect((await deps.usage.getStored(workflow.workspaceId)).bytes).toBe(again.stateBytes);
    // Cancelled at its URL: the continuation (a record only) ends and the bytes are taken back.
    const newToken = base.split("/").at(-1) as string;
    expect(token).not.toBe(newToken);
    expect((await receiveFlowRequest(deps, "run_a", newToken, "cancel", request())).status).toBe(202);
    await runWorkflow(deps, queued.at(-1) as WorkflowRunJob);
    expect(await deps.pausedRuns.get("run_a")).toBeUndefined();
    expect((await deps.usage.getStored(workflow.workspaceId)).bytes).toBe(0);
  });
});

describe("a continuation over the workspace's quota", () => {
  it("waits for the quota's window (RunBusyError) and keeps the pause it goes on from", async () => {
    const { deps, queued, token, workflow } = await setUp();
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
    await deps.usage.addUsage(workflow.workspaceId, usageDay(deps.clock.nowMs()), { invocations: 1000 });
    const job = queued[0] as WorkflowRunJob;
    const waited = await runWorkflow(deps, job).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(waited).toBeInstanceOf(RunBusyError);
    expect((waited as RunBusyError).retryAtMs).toBe(Date.UTC(2026, 10, 28));
    expect((waited as Error).message).toContain("daily_invocations");
    expect((await deps.pausedRuns.get("run_a"))?.dispatch).toMatchObject({ how: "resume" });
    // Local mode's sweep leaves it alone while it waits: no copy is queued to count against the quota.
    const store = deps.pausedRuns as Parameters<typeof dispatchDuePauses>[1];
    const retryAt = Date.UTC(2026, 10, 28);
    expect(await store.due(retryAt, retryAt - 1, 10)).toEqual([]);
    expect((await store.due(retryAt + 10 * 60_000, retryAt, 10)).map((pause) => pause.id)).toEqual(["run_a"]);
  });
});

describe("a paused run whose workflow was made inactive after its pause was taken", () => {
  it("is cancelled on the record (cancel_reason inactive), not dropped, and its bytes taken back", async () => {
    const { deps, queued, token, workflow } = await setUp();
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
    await deps.workflows.updateWorkflow({ ...workflow, active: false });
    const outcome = await runWorkflow(deps, queued[0] as WorkflowRunJob);
    expect(outcome).toMatchObject({
      outcome: "ran",
      run: { status: "cancelled", cancelReason: "inactive", resumedFrom: "run_a" },
    });
    expect(await deps.pausedRuns.get("run_a")).toBeUndefined();
    expect((await deps.usage.getStored(workflow.workspaceId)).bytes).toBe(0);
  });

  it("takes back nothing it never counted (a pause kept before pauses were counted)", async () => {
    const { deps, workflow } = await setUp();
    const before = (await deps.usage.getStored(workflow.workspaceId)).bytes;
    await countPausedBytes(deps, workflow, Number.NaN, 0);
    await countPausedBytes(deps, workflow, -(undefined as unknown as number), 0);
    // The usage writes grouped with them still land (a NaN failed the whole group before).
    await countPausedBytes(deps, workflow, 10, 0);
    expect((await deps.usage.getStored(workflow.workspaceId)).bytes).toBe(before + 10);
  });
});

describe("dispatching due pauses (local mode's driver)", () => {
  it("dispatches what is due once, and queues a taken pause again only when its continuation is long overdue", async () => {
    const { deps, queued, token } = await setUp("delay");
    const store = deps.pausedRuns as Parameters<typeof dispatchDuePauses>[1];
    const now = deps.clock.nowMs();
    expect(await dispatchDuePauses(deps, store, now + 59_000)).toBe(0);
    expect(await dispatchDuePauses(deps, store, now + 60_000)).toBe(1);
    expect((await store.get("run_a"))?.dispatch).toMatchObject({ how: "due", atMs: now + 60_000 });
    expect(await dispatchDuePauses(deps, store, now + 61_000)).toBe(0);
    // Ten minutes on, still there: its continuation was lost; queued again under the same run id.
    expect(await dispatchDuePauses(deps, store, now + 60_000 + 10 * 60_000)).toBe(1);
    expect(queued).toHaveLength(2);
    expect(queued[1]).toEqual(queued[0]);
    // The URL comes after the time: the delay went on already, so resuming it again is the same.
    expect((await receiveFlowRequest(deps, "run_a", token, "resume", request())).status).toBe(202);
  });
});

/** `keepPause` of `pause` for run `runId` of `workflow`, started by a timer with `event`, at time 0. */
function keepTestPause(
  deps: Parameters<typeof keepPause>[0] & Parameters<typeof newFlowBase>[0],
  workflow: WorkflowRecord,
  runId: string,
  pause: WorkflowPause,
  event: Json = null,
) {
  const job = { kind: "workflow", workflowId: workflow.id, runId, trigger: "timer", triggerId: "ti_1", event } as const;
  const run = { id: runId, trigger: { type: "timer", id: "ti_1" } } as WorkflowRun;
  return keepPause(deps, workflow, job, run, newFlowBase(deps, runId), pause, undefined, "k_1", 0);
}

describe("keepPause", () => {
  it("refuses a state over 256 KiB with the trigger event counted, and keeps nothing", async () => {
    const deps = memoryDeps();
    const refused = await keepTestPause(
      deps,
      { id: "p_a", deploymentId: "d_1", steps: [] } as unknown as WorkflowRecord,
      "run_big",
      { kind: "delay", stepId: "c_1", afterMs: 1, steps: { a: "s".repeat(100 * 1024) } },
      "e".repeat(200 * 1024),
    );
    expect(refused).toMatchObject({ name: "PauseError" });
    expect(refused?.message).toContain("over the 262144 a paused run may keep");
    expect(await deps.pausedRuns.get("run_big")).toBeUndefined();
  });

  it("refuses a pause in a workspace over its stored-bytes quota, naming it and what to do", async () => {
    const deps = memoryDeps();
    const owner = await accountIn(deps, "ada");
    const workflow = workflowRecord(owner, "p_full");
    await deps.usage.addStored(owner.workspace.id, "dc_other", 0, { events: 1, bytes: 500 });
    const refused = await keepTestPause({ ...deps, quotas: { ...deps.quotas, storedBytes: 400 } }, workflow, "run_q", {
      kind: "delay",
      stepId: "c_1",
      afterMs: 1,
      steps: {},
    });
    expect(refused).toMatchObject({ name: "PauseError" });
    expect(refused?.message).toContain("over its stored_bytes quota (400)");
    expect(refused?.message).toContain("resume or cancel paused runs");
    expect(await deps.pausedRuns.get("run_q")).toBeUndefined();
  });

  it(`refuses a pause past ${MAX_PAUSED_RUNS_PER_WORKFLOW} paused runs of the workflow`, async () => {
    const deps = memoryDeps();
    const full = Object.assign(Object.create(deps.pausedRuns), {
      countPending: async () => MAX_PAUSED_RUNS_PER_WORKFLOW,
    });
    const refused = await keepTestPause(
      { ...deps, pausedRuns: full },
      { id: "p_a", deploymentId: "d_1", steps: [] } as unknown as WorkflowRecord,
      "run_c",
      { kind: "suspend", stepId: "c_1", afterMs: 1, steps: {} },
    );
    expect(refused?.message).toContain("10000 runs of this workflow are paused already");
  });
});

describe("checkWorkflowResult: a forged pause fails the run whole", () => {
  const flow = "http://127.0.0.1/flow/run_a/secret";
  const invocation = (extra: Partial<WorkflowInvocation> = {}) =>
    ({
      invocationId: "inv",
      kind: "workflow",
      workflowId: "p_a",
      trigger: { event: null },
      context: { run: { runs: 1 } },
      steps: [{ id: "c_1" }, { id: "c_2" }],
      respondable: false,
      timeoutMs: 1000,
      limits: {},
      flow,
      ...extra,
    }) as unknown as WorkflowInvocation;
  const result = (pause: WorkflowPause, status: "success" | "error" = "success"): WorkflowResult => ({
    invocationId: "inv",
    steps: [
      {
        id: "c_1",
        status,
        exportBytes: 0,
        dbWrites: {},
        durationMs: 1,
        ...(status === "error" ? { error: { name: "E", message: "m", ts: 0 } } : {}),
      },
    ],
    sends: [],
    logs: [],
    pause,
    durationMs: 1,
  });
  const good: WorkflowPause = { kind: "rerun", stepId: "c_1", afterMs: 1000, maxReruns: 3, steps: {} };

  it.each([
    ["a run that could not pause", result(good), invocation({ flow: undefined }), "could not"],
    ["a pause of another step", result({ ...good, stepId: "c_2" }), invocation(), "does not follow"],
    ["a pause after a failed step", result(good, "error"), invocation(), "does not follow"],
    ["a pause over 365 days", result({ ...good, afterMs: 366 * 86_400_000 }), invocation(), "longer"],
    ["a rerun without maxReruns", result({ ...good, maxReruns: undefined }), invocation(), "maxReruns"],
    ["a rerun past its reruns", result(good), invocation({ rerun: { runs: 4, context: null } }), "past its maxReruns"],
  ])("%s", (_case, forged, made, text) => {
    const checked = checkWorkflowResult(forged, made, 0);
    expect(checked.ok).toBe(false);
    if (!checked.ok) expect(checked.error.message).toContain(text);
  });

  it("takes a consistent pause", () => {
    expect(checkWorkflowResult(result(good), invocation({ rerun: { runs: 3, context: null } }), 0).ok).toBe(true);
    // The count is the first step's only: a pause of a later step is its first run.
    const later = {
      ...result({ ...good, stepId: "c_2" }),
      steps: [...result(good).steps, { ...result(good).steps[0], id: "c_2" }],
    };
    expect(checkWorkflowResult(later as WorkflowResult, invocation({ rerun: { runs: 9, context: null } }), 0).ok).toBe(
      true,
    );
  });
});
