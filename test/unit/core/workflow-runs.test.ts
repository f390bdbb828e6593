import { describe, expect, it } from "vitest";
import type { ComponentRecord, PropDescription, StoredEvent } from "#core/component-model";
import { HOPS_HEADER, hopsOf } from "#core/hops";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { WorkflowCode } from "#core/ports/component-host";
import type { DeliveryQueue } from "#core/ports/delivery-queue";
import { RunBusyError, type RunJob, type WorkflowRunJob } from "#core/ports/run-queue";
import { sealSecretValues } from "#core/props";
import { runQueuedJob } from "#core/run-jobs";
import { sha256Hex } from "#core/sha256";
import { receiveHttpRequest } from "#core/source-endpoint";
import type { DeliveryRecord } from "#core/subscription-model";
import type { StepRecord, WorkflowRecord } from "#core/workflow-model";
import { listWorkflowRuns, runIdFor } from "#core/workflow-runs";
import type { ErrorRecord, SendRecord, StepOutcome, WorkflowInvocation } from "#runtime/protocol";
import { accountIn, memoryDeps, scriptedHost, type WorkflowScript } from "../../support/memory-deps.ts";
import { runningRun } from "../../support/workflow-record.ts";

const POST = (body: unknown = { hello: 1 }): IncomingHttpRequest => ({
  method: "POST",
  path: "/",
  rawQuery: "",
  headers: { "content-type": "application/json" },
  body: Buffer.from(JSON.stringify(body)),
  clientIp: "127.0.0.1",
  url: "http://127.0.0.1:4000/http/k",
});

const DB: PropDescription = { name: "db", type: "$.service.db" };
const TOKEN: PropDescription = { name: "token", type: "string", secret: true };

interface SetUpOptions {
  script?: WorkflowScript;
  customResponse?: boolean;
  active?: boolean;
  /** Props of every step's component. */
  props?: PropDescription[];
  /** Index of a disabled step. */
  disabled?: number;
}

/** A workflow of three steps with an HTTP trigger, put in the store directly, run by a scripted host. */
async function setUp(options: SetUpOptions = {}) {
  const { host, workflowCalls, workflowCodes } = scriptedHost({}, undefined, options.script ?? (async () => ({})));
  const jobs: RunJob[] = [];
  /** What reached the delivery queue, and the order of the apply's writes (design 3.5). */
  const delivered: DeliveryRecord[] = [];
  const order: string[] = [];
  const deps = memoryDeps(Date.UTC(2026, 10, 26, 9), {
    host,
    runs: { enqueue: async (job) => void jobs.push(job) },
    deliveries: {
      enqueue: async (records) => {
        order.push("sends");
        delivered.push(...records);
      },
    } as DeliveryQueue,
    // Bucket "b" is allowed; nothing is written (s3 sends are only queued here).
    objects: {
      allowsBucket: (bucket) => bucket === "b",
      keyProblem: () => undefined,
      putObject: async () => ({ error: "not in this test" }),
    },
  });
  const account = await accountIn(deps, "alice");
  const now = deps.clock.nowMs();
  const code = `export default defineComponent({ props: ${JSON.stringify(options.props ?? [])}, async run() {} })`;
  const component: ComponentRecord = {
    id: deps.ids.newId("component"),
    ownerId: account.user.id,
    name: "Step",
    version: "1.0.0",
    code,
    codeHash: sha256Hex(code),
    metadata: {
      type: "action",
      hooks: [],
      methods: [],
      hasRun: true,
      hasAdditionalProps: false,
      props: options.props ?? [],
      name: "Step",
      version: "1.0.0",
    },
    createdAt: now,
    updatedAt: now,
  };
  await deps.components.putComponent(component);
  const configuredProps = options.props?.some((prop) => prop.name === "token")
    ? await sealSecretValues(deps.secrets, { token: "s3cret" }, ["token"])
    : {};
  const steps: StepRecord[] = ["parse", "work", "reply"].map((namespace, index) => ({
    id: deps.ids.newId("step"),
    namespace,
    disabled: options.disabled === index,
    origin: "code",
    componentId: component.id,
    configuredProps,
  }));
  const key = `key${deps.ids.newSecret(8)}`;
  const workflow: WorkflowRecord = {
    id: deps.ids.newId("workflow"),
    userId: account.user.id,
    workspaceId: account.workspace.id,
    projectId: account.project.id,
    name: "Orders",
    active: options.active ?? true,
    deploymentId: deps.ids.newId("deployment"),
    steps,
    triggers: [
      {
        type: "http",
        id: deps.ids.newId("httpTrigger"),
        key,
        customResponse: options.customResponse ?? false,
        createdAt: now,
        updatedAt: now,
      },
    ],
    createdAt: now,
    updatedAt: now,
  };
  await deps.workflows.createWorkflow(workflow);
  const events = async (channel: string) => (await deps.events.listEvents(workflow.id, { channel, limit: 100 })).items;
  const runs = async () => (await deps.workflowRuns.listRuns(workflow.id, { limit: 100 })).items;
  /** Requests the trigger without custom response, then runs the queued job. */
  const runOnce = async () => {
    const answer = await receiveHttpRequest(deps, key, POST());
    expect(answer.status).toBe(200);
    await runQueuedJob(deps, jobs.at(-1) as RunJob);
  };
  return {
    deps,
    account,
    workflow,
    component,
    steps,
    key,
    jobs,
    workflowCalls,
    workflowCodes,
    events,
    runs,
    runOnce,
    delivered,
    order,
  };
}

const ok = (id: string, extra: Partial<StepOutcome> = {}): StepOutcome => ({
  id,
  status: "success",
  exportBytes: 0,
  dbWrites: {},
  durationMs: 1,
  ...extra,
});
const thrown = (name: string, message = "boom"): ErrorRecord => ({
  name,
  message,
  stack: `${name}: ${message}`,
  ts: 1,
});
const ids = (invocation: WorkflowInvocation) => invocation.steps.map((step) => step.id);
const codesOf = (events: StoredEvent[]) =>
  events.map((event) => (event.event as { error: { code: string } }).error.code);

/**
 * How many sends the delivery side refused, from the run's `SendRefusedError` (`queueWorkflowSends`
 * refuses every send until the delivery targets exist, design step 9; then it queues them).
 */
function refusedSends(errors: StoredEvent[]): { count: number; message: string } {
  const refusal = errors.find((event) => codesOf([event])[0] === "SendRefusedError");
  const message = (refusal?.event as { error: { message: string } } | undefined)?.error.message ?? "";
  return { count: Number(/^(\d+) sends were not queued/.exec(message)?.[1] ?? 0), message };
}

describe("a workflow's HTTP trigger without custom response", () => {
  it("queues the run durably, answers 200, and the run gets its steps, props, context and event", async () => {
    const t = await setUp({ props: [TOKEN], disabled: 1 });
    const answer = await receiveHttpRequest(t.deps, t.key, POST({ order: 7 }));
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ success: true });
    expect(t.jobs).toEqual([
      expect.objectContaining({
        kind: "workflow",
        workflowId: t.workflow.id,
        trigger: "http",
        triggerId: t.workflow.triggers[0]?.type === "http" ? t.workflow.triggers[0].id : "",
        runId: expect.stringMatching(/^run_/),
      }),
    ]);
    expect(t.workflowCalls).toEqual([]);

    await runQueuedJob(t.deps, t.jobs[0] as RunJob);
    const [invocation] = t.workflowCalls as [WorkflowInvocation];
    // The disabled step is not sent; the secret arrives opened.
    expect(invocation.steps.map((step) => step.namespace)).toEqual(["parse", "reply"]);
    expect(invocation.steps[0]?.props).toEqual({ token: "s3cret" });
    expect(invocation.respondable).toBe(false);
    expect(invocation.trigger.event).toMatchObject({ method: "POST", body: { order: 7 } });
    expect(invocation.context).toEqual({
      id: (t.jobs[0] as WorkflowRunJob).runId,
      ts: "2026-11-26T09:00:00.000Z",
      workflow_id: t.workflow.id,
      deployment_id: t.workflow.deploymentId,
      source_type: "HTTP",
      verified: false,
      owner_id: t.account.user.id,
      platform_version: "sluice",
      JIT: false,
      run: { runs: 1, retry_count: 0 },
    });
    expect(invocation.limits).toEqual({
      maxEmits: 1_000,
      maxEmitBytes: 8 * 1024 * 1024,
      maxSends: 100,
      maxSendBytes: 4 * 1024 * 1024,
      maxExportBytes: 8 * 1024 * 1024,
    });
    const [run] = await t.runs();
    expect(run).toMatchObject({
      id: (t.jobs[0] as WorkflowRunJob).runId,
      status: "success",
      trigger: { type: "http" },
      steps: [
        { namespace: "parse", status: "success" },
        { namespace: "work", status: "skipped" },
        { namespace: "reply", status: "success" },
      ],
    });
    // One invocation, whatever the number of steps.
    const usage = await t.deps.usage.getUsage(t.workflow.workspaceId, "2026-11-26");
    expect(usage.invocations).toBe(1);
  });

  it("builds the props of a deployment without secrets once; opens secrets on every run", async () => {
    const plain = await setUp({ props: [{ name: "n", type: "integer", default: 3 } as PropDescription] });
    await plain.runOnce();
    await plain.runOnce();
    const [first, second] = plain.workflowCalls as [WorkflowInvocation, WorkflowInvocation];
    expect(second.steps[0]?.props).toBe(first.steps[0]?.props);
    const secret = await setUp({ props: [TOKEN] });
    await secret.runOnce();
    await secret.runOnce();
    const [one, two] = secret.workflowCalls as [WorkflowInvocation, WorkflowInvocation];
    expect(two.steps[0]?.props).toEqual({ token: "s3cret" });
    expect(two.steps[0]?.props).not.toBe(one.steps[0]?.props);
  });

  it("hands the host one code object per deployment (what it derives from it is kept), a new one when a step's code changed", async () => {
    const { deps, component, workflow, runOnce, workflowCodes } = await setUp();
    await runOnce();
    await runOnce();
    const [first, second] = workflowCodes as [WorkflowCode, WorkflowCode];
    expect(second).toBe(first);
    expect(first.steps.map((step) => step.codeHash)).toEqual([component.codeHash]);

    // Components never change (a changed step is a new component and a new deployment); should a
    // step's component change under the same deployment id, the run still gets the new code.
    const code = `${component.code}\n// changed`;
    const changed = { ...component, id: deps.ids.newId("component"), code, codeHash: sha256Hex(code) };
    await deps.components.putComponent(changed);
    const stored = (await deps.workflows.getWorkflow(workflow.id)) as WorkflowRecord;
    const steps = stored.steps.map((step) => ({ ...step, componentId: changed.id }));
    await deps.workflows.updateWorkflow({ ...stored, steps });
    await runOnce();
    const third = workflowCodes[2] as WorkflowCode;
    expect(third).not.toBe(first);
    expect(third.steps).toEqual([{ codeHash: sha256Hex(code), code }]);
  });

  it("runs a repeated job once: beginRun finds it done", async () => {
    const t = await setUp();
    await receiveHttpRequest(t.deps, t.key, POST());
    const job = t.jobs[0] as RunJob;
    await runQueuedJob(t.deps, job);
    await runQueuedJob(t.deps, job);
    expect(t.workflowCalls).toHaveLength(1);
    expect(await t.runs()).toHaveLength(1);
  });

  it("fails a job whose run another runner holds, saying until when", async () => {
    const t = await setUp();
    const now = t.deps.clock.nowMs();
    const job: WorkflowRunJob = {
      kind: "workflow",
      workflowId: t.workflow.id,
      runId: runIdFor(now, "ti_x", String(now)),
      trigger: "timer",
      triggerId: "ti_x",
      event: {},
    };
    await t.deps.workflowRuns.beginRun(
      runningRun({
        id: job.runId,
        workflowId: t.workflow.id,
        deploymentId: t.workflow.deploymentId,
        trigger: { type: "timer", id: "ti_x" },
        attempts: 1,
        startedAt: now,
      }),
      now,
    );
    const busy = await runQueuedJob(t.deps, job).catch((error: unknown) => error);
    expect(busy).toBeInstanceOf(RunBusyError);
    expect((busy as RunBusyError).retryAtMs).toBe(now + 60_001);
    expect(t.workflowCalls).toHaveLength(0);
    // Past the lease, the run is taken over, and the context says it is a retry.
    t.deps.clock.set(now + 60_001);
    await runQueuedJob(t.deps, job);
    expect(t.workflowCalls[0]?.context).toMatchObject({ source_type: "TIMER", run: { retry_count: 1 } });
  });

  it("drops the queued jobs of an inactive or deleted workflow, and answers 404 while inactive", async () => {
    const t = await setUp();
    await receiveHttpRequest(t.deps, t.key, POST());
    await t.deps.workflows.updateWorkflow({ ...t.workflow, active: false });
    await runQueuedJob(t.deps, t.jobs[0] as RunJob);
    expect(t.workflowCalls).toHaveLength(0);
    expect(await t.runs()).toEqual([]);
    expect((await receiveHttpRequest(t.deps, t.key, POST())).status).toBe(404);
    expect(t.jobs).toHaveLength(1);
    await t.deps.workflows.deleteWorkflow(t.workflow.id);
    await runQueuedJob(t.deps, t.jobs[0] as RunJob);
    expect(t.workflowCalls).toHaveLength(0);
    expect((await receiveHttpRequest(t.deps, t.key, POST())).status).toBe(404);
  });
});

describe("applying a workflow run's result", () => {
  it("queues sends, then writes the steps' states, then stores the events in one append, then records the run", async () => {
    const t = await setUp({
      props: [DB],
      script: async (invocation) => ({
        steps: [
          ok(ids(invocation)[0] as string, { dbWrites: { seen: 1 } }),
          ok(ids(invocation)[1] as string),
          ok(ids(invocation)[2] as string),
        ],
        sends: <SendRecord[]>[
          { type: "emit", raw_event: { n: 1 } },
          { type: "http", method: "POST", url: "https://example.com/hook", data: { n: 2 } },
          { type: "sse", channel: "progress", payload: { pct: 50 } },
          { type: "s3", bucket: "b", prefix: "p/", payload: { n: 3 } },
        ],
      }),
    });
    const { workflows, events, workflowRuns } = t.deps;
    const wrap = <T extends object>(target: T, method: keyof T, name: string) => {
      const original = (target[method] as (...args: unknown[]) => Promise<unknown>).bind(target);
      (target as Record<keyof T, unknown>)[method] = (...args: unknown[]) => {
        t.order.push(name);
        return original(...args);
      };
    };
    wrap(workflows, "putStepStates", "states");
    wrap(events, "appendEvents", "events");
    wrap(workflowRuns, "finishRun", "record");
    await t.runOnce();
    expect(t.order.filter((step) => step !== "sends")).toEqual(["states", "events", "record"]);
    expect(t.order.lastIndexOf("sends")).toBeLessThan(t.order.indexOf("states"));

    // The http and s3 sends (1 and 3) went to the delivery queue, once each, in call order.
    expect(t.delivered.map((delivery) => delivery.target.kind)).toEqual(["http", "s3"]);
    expect(await t.events("$errors")).toEqual([]);
    expect((await t.events("")).map((event) => event.event)).toEqual([{ raw_event: { n: 1 } }]);
    const [sse] = await t.events("$sse");
    expect(sse).toMatchObject({ event: { pct: 50 }, meta: { name: "progress" } });
    expect(await t.deps.workflows.getStepStates(t.workflow.id)).toEqual({
      [t.steps[0]?.id as string]: { db: { seen: 1 }, version: 1 },
    });
    // The next run reads the step's state.
    await t.runOnce();
    expect(t.workflowCalls[1]?.steps[0]?.db).toEqual({ seen: 1 });
  });

  it("stores a failed step's error on $errors in the spec's shape, naming its step, and skips the rest", async () => {
    const t = await setUp({
      script: async (invocation) => ({
        steps: [
          ok(ids(invocation)[0] as string),
          { ...ok(ids(invocation)[1] as string), status: "error", error: thrown("TypeError", "x is not a function") },
        ],
        sends: [{ type: "emit", raw_event: { before: "the error" } }],
      }),
    });
    await t.runOnce();
    const [error] = await t.events("$errors");
    const runId = (t.jobs[0] as WorkflowRunJob).runId;
    expect(error?.sourceId).toBe(t.workflow.id);
    expect(error?.event).toEqual({
      original_event: expect.objectContaining({ method: "POST", body: { hello: 1 } }),
      original_context: expect.objectContaining({
        id: runId,
        workflow_id: t.workflow.id,
        deployment_id: t.workflow.deploymentId,
        source_type: "HTTP",
        owner_id: t.account.user.id,
      }),
      error: {
        code: "TypeError",
        cellId: t.steps[1]?.id,
        ts: "1970-01-01T00:00:00.001Z",
        message: "x is not a function",
        stack: "TypeError: x is not a function",
      },
    });
    // What the run sent before the error stands.
    expect(await t.events("")).toHaveLength(1);
    const [run] = await t.runs();
    expect(run).toMatchObject({
      status: "error",
      error: { code: "TypeError", cellId: t.steps[1]?.id, message: "x is not a function" },
      steps: [{ status: "success" }, { status: "error" }, { status: "skipped" }],
    });
  });

  it("names no step for a run-level error (the host killed the process)", async () => {
    const t = await setUp({ script: async () => ({ steps: [], error: thrown("TimeoutError", "killed") }) });
    await t.runOnce();
    const [error] = await t.events("$errors");
    expect(error?.event).toMatchObject({ error: { code: "TimeoutError", cellId: "" } });
    expect((await t.runs())[0]).toMatchObject({ status: "error", error: { cellId: "" } });
  });

  it("stores, sends and routes nothing of a run that failed because its workflow was deleted meanwhile", async () => {
    const removed = new Set<string>();
    const t = await setUp({
      script: async () => ({
        steps: [],
        sends: [{ type: "emit", raw_event: "before the removal" }],
        error: thrown("SandboxError", "the workflow was removed"),
      }),
    });
    t.deps.host = { ...t.deps.host, wasRemoved: (id) => removed.has(id) };
    removed.add(t.workflow.id);
    await t.runOnce();
    expect(await t.events("")).toEqual([]);
    expect(await t.events("$errors")).toEqual([]);
    expect(t.delivered).toEqual([]);
    // A caller waiting on a custom response is answered as the endpoint now is.
    const waiting = await setUp({
      customResponse: true,
      script: async () => ({ error: thrown("SandboxError", "gone") }),
    });
    waiting.deps.host = { ...waiting.deps.host, wasRemoved: (id) => id === waiting.workflow.id };
    expect((await receiveHttpRequest(waiting.deps, waiting.key, POST())).status).toBe(404);
    expect(await waiting.events("$errors")).toEqual([]);
  });

  it("records a $.flow.exit as an exited run with its reason and no $errors", async () => {
    const t = await setUp({
      script: async (invocation) => ({
        steps: [{ ...ok(ids(invocation)[0] as string), status: "exited", exitReason: "nothing to do" }],
      }),
    });
    await t.runOnce();
    expect(await t.events("$errors")).toEqual([]);
    expect((await t.runs())[0]).toMatchObject({
      status: "exited",
      exitReason: "nothing to do",
      steps: [{ status: "exited" }, { status: "skipped" }, { status: "skipped" }],
    });
  });

  it("turns the sends the delivery side refuses into one $errors event naming the step the run ended in", async () => {
    const t = await setUp({
      script: async () => ({ sends: [{ type: "s3", bucket: "not-allowed-here", prefix: "", payload: 1 }] }),
    });
    await t.runOnce();
    const errors = await t.events("$errors");
    expect(t.delivered).toEqual([]);
    expect(refusedSends(errors).count).toBe(1);
    expect(errors[0]?.event).toMatchObject({
      error: {
        code: "SendRefusedError",
        cellId: t.steps[2]?.id,
        message: expect.stringMatching(/^1 sends were not queued: send 0: ./),
      },
    });
    expect((await t.runs())[0]?.status).toBe("success");
  });
});

describe("limits of a workflow run", () => {
  it("keeps the first 100 of 10,000 sends and says so on $errors, naming the step that ran last", async () => {
    const many: SendRecord[] = Array.from({ length: 10_000 }, (_, n) => ({ type: "emit", raw_event: { n } }));
    const t = await setUp({ script: async () => ({ sends: many }) });
    await t.runOnce();
    expect(await t.deps.events.listEvents(t.workflow.id, { channel: "", limit: 1 })).toMatchObject({ totalCount: 100 });
    const [cut] = await t.events("$errors");
    expect(cut?.event).toMatchObject({
      error: { code: "WorkflowLimitError", cellId: t.steps[2]?.id, message: expect.stringContaining("more than 100") },
    });
    // A cut is not a failure of the run.
    expect((await t.runs())[0]?.status).toBe("success");
  });

  it("cuts $.send.emit at the run's emit limits as a source's emits are cut, other sends counting for neither", async () => {
    const mixed = (n: number): SendRecord[] => [
      { type: "sse", channel: "live", payload: n },
      { type: "emit", raw_event: { n, pad: "p".repeat(1_000) } },
    ];
    const t = await setUp({ script: async () => ({ sends: Array.from({ length: 10 }, (_, n) => mixed(n)).flat() }) });
    t.deps.runtime.emitLimits = { maxEmits: 3, maxEmitBytes: 8 * 1024 * 1024 };
    await t.runOnce();
    expect((await t.events("")).map((event) => (event.event as any).raw_event.n).sort()).toEqual([0, 1, 2]);
    const [byCount] = await t.events("$errors");
    expect(byCount?.event).toMatchObject({
      error: { message: expect.stringMatching(/^the run emitted more than 3 events, the most one run may emit/) },
    });

    const u = await setUp({ script: async () => ({ sends: Array.from({ length: 10 }, (_, n) => mixed(n)).flat() }) });
    u.deps.runtime.emitLimits = { maxEmits: 1_000, maxEmitBytes: 2_500 };
    await u.runOnce();
    expect((await u.events("")).map((event) => (event.event as any).raw_event.n).sort()).toEqual([0, 1]);
    const [byBytes] = await u.events("$errors");
    expect(byBytes?.event).toMatchObject({
      error: { message: expect.stringMatching(/^the run emitted more than 2500 bytes/) },
    });
  });

  it("drops a 50 MB send alone and keeps the others", async () => {
    const huge = "x".repeat(50 * 1024 * 1024);
    const t = await setUp({
      script: async () => ({
        sends: [
          { type: "http", method: "POST", url: "https://example.com", data: huge },
          { type: "emit", raw_event: "small" },
        ],
      }),
    });
    await t.runOnce();
    expect(t.delivered).toEqual([]);
    expect((await t.events("")).map((event) => event.event)).toEqual([{ raw_event: "small" }]);
    expect(codesOf(await t.events("$errors"))).toEqual(["WorkflowLimitError"]);
    const [cut] = await t.events("$errors");
    expect(cut?.event).toMatchObject({ error: { code: "WorkflowLimitError" } });
    expect(JSON.stringify(cut?.event).length).toBeLessThan(64 * 1024);
  });

  it("cuts at the run's send bytes and refuses an sse channel that is no name", async () => {
    const quarter = "y".repeat(200 * 1024);
    const t = await setUp({
      script: async () => ({
        sends: [
          { type: "sse", channel: "bad\nname", payload: 1 },
          ...Array.from({ length: 30 }, (): SendRecord => ({ type: "emit", raw_event: quarter })),
        ],
      }),
    });
    t.deps.runtime.workflowLimits.maxSendBytes = 1024 * 1024;
    await t.runOnce();
    expect(await t.events("")).toHaveLength(5);
    expect(await t.events("$sse")).toEqual([]);
    const [cut] = await t.events("$errors");
    expect(cut?.event).toMatchObject({
      error: { message: expect.stringMatching(/more than 1048576 bytes.*sse channel/s) },
    });
  });

  it("refuses an sse channel with a bidirectional control character", async () => {
    const t = await setUp({
      script: async () => ({
        sends: [
          { type: "sse", channel: "a\u202Eb", payload: 1 },
          { type: "sse", channel: "plain", payload: 2 },
        ],
      }),
    });
    await t.runOnce();
    expect((await t.events("$sse")).map((event) => event.event)).toEqual([2]);
    const [cut] = await t.events("$errors");
    expect(cut?.event).toMatchObject({
      error: { code: "WorkflowLimitError", message: expect.stringMatching(/bidirectional control/) },
    });
  });

  it("keeps a log line's step only when that step ran: the child's word names no other", async () => {
    const t = await setUp({
      script: async (invocation) => ({
        steps: invocation.steps.map((step) => ok(step.id)),
        logs: [
          { ts: 1, level: "log", message: "mine", step: invocation.steps[0]?.id ?? "" },
          { ts: 2, level: "log", message: "forged", step: `c_SOMEONE_ELSE_${"x".repeat(200)}` },
        ],
      }),
    });
    await t.runOnce();
    const [run] = await t.runs();
    expect(run?.logs.map((log) => [log.message, log.step])).toEqual([
      ["mine", t.steps[0]?.id],
      ["forged", ""],
    ]);
  });

  it("refuses a step's db writes over 256 KiB, naming that step", async () => {
    const t = await setUp({
      props: [DB],
      script: async (invocation) => ({
        steps: invocation.steps.map((step, index) =>
          ok(step.id, index === 1 ? { dbWrites: { big: "z".repeat(300 * 1024) } } : {}),
        ),
      }),
    });
    await t.runOnce();
    expect(await t.deps.workflows.getStepStates(t.workflow.id)).toEqual({});
    const [cut] = await t.events("$errors");
    expect(cut?.event).toMatchObject({ error: { code: "ServiceDbLimitError", cellId: t.steps[1]?.id } });
  });
});

describe("forged results", () => {
  const forgeries: [string, (invocation: WorkflowInvocation) => Record<string, unknown>][] = [
    [
      "an unknown step",
      (invocation) => ({ steps: [ok("c_forged"), ...invocation.steps.slice(1).map((s) => ok(s.id))] }),
    ],
    ["steps in the wrong order", (invocation) => ({ steps: [...invocation.steps].reverse().map((s) => ok(s.id)) })],
    [
      "a step after an error",
      (invocation) => ({
        steps: invocation.steps.map((s, index) =>
          index === 0 ? { ...ok(s.id), status: "error", error: thrown("Error") } : ok(s.id),
        ),
      }),
    ],
    [
      "a step after an exit",
      (invocation) => ({
        steps: invocation.steps.map((s, index) => (index === 0 ? { ...ok(s.id), status: "exited" } : ok(s.id))),
      }),
    ],
    [
      "more steps than the run has",
      (invocation) => ({ steps: [...invocation.steps, invocation.steps[0]].map((s) => ok(s?.id as string)) }),
    ],
    ["a response the run could not give", () => ({ response: { status: 200, headers: {}, body: "hi" } })],
    ["another invocation's id", () => ({ invocationId: "someone-else" })],
  ];

  it.each(forgeries)("drops %s whole as a SandboxError; nothing of it reaches any emitter", async (_name, forge) => {
    const t = await setUp({
      props: [DB],
      script: async (invocation) => ({
        ...forge(invocation),
        sends: [
          { type: "emit", raw_event: "forged" },
          { type: "http", method: "POST", url: "https://example.com", data: 1 },
        ],
        logs: [{ ts: 1, level: "log", message: "forged", step: "c_forged" }],
      }),
    });
    const other = await setUp();
    await t.runOnce();
    expect(await t.events("")).toEqual([]);
    expect(t.delivered).toEqual([]);
    expect(await t.deps.workflows.getStepStates(t.workflow.id)).toEqual({});
    const errors = await t.events("$errors");
    expect(errors.map((event) => (event.event as { error: { code: string } }).error.code)).toEqual(["SandboxError"]);
    expect((await t.runs())[0]).toMatchObject({
      status: "error",
      error: { code: "SandboxError", cellId: "" },
      logs: [],
    });
    // Every event of the deps is the workflow's own; the other workflow got nothing.
    expect(await other.events("$errors")).toEqual([]);
    expect(await t.deps.events.listEvents(other.workflow.id, { limit: 10 })).toMatchObject({ items: [] });
  });
});

describe("a workflow's HTTP trigger with custom response", () => {
  const respond = async (
    script: WorkflowScript,
    extra: Partial<SetUpOptions> = {},
  ): Promise<{ status: number; body: string; headers: Record<string, string> }> => {
    const t = await setUp({ customResponse: true, script, ...extra });
    const answer = await receiveHttpRequest(t.deps, t.key, POST());
    expect(t.jobs).toEqual([]);
    return answer;
  };

  it("answers $.respond's response once the run's effects are stored", async () => {
    let stored = 0;
    const t = await setUp({
      customResponse: true,
      script: async (invocation) => {
        expect(invocation.respondable).toBe(true);
        return {
          response: { status: 201, headers: { "x-a": "1" }, body: "made" },
          sends: [{ type: "emit", raw_event: 1 }],
        };
      },
    });
    const append = t.deps.events.appendEvents.bind(t.deps.events);
    t.deps.events.appendEvents = async (...args) => {
      const result = await append(...args);
      stored++;
      return result;
    };
    const answer = await receiveHttpRequest(t.deps, t.key, POST());
    expect(stored).toBe(1);
    expect(answer).toMatchObject({ status: 201, body: "made", headers: { "x-a": "1" } });
    expect(await t.runs()).toHaveLength(1);
  });

  it("answers 400 text/plain when the run ends without $.respond, successfully or by $.flow.exit", async () => {
    for (const script of [
      async () => ({}),
      async (invocation: WorkflowInvocation) => ({
        steps: [{ ...ok(ids(invocation)[0] as string), status: "exited" as const }],
      }),
    ]) {
      const answer = await respond(script);
      expect(answer.status).toBe(400);
      expect(answer.headers["content-type"]).toMatch(/^text\/plain/);
      expect(answer.body).toBe("No $.respond called in workflow");
    }
  });

  it("answers 400 when a step fails before responding, 504 when the time limit is reached", async () => {
    const failed = await respond(async (invocation) => ({
      steps: [{ ...ok(ids(invocation)[0] as string), status: "error", error: thrown("Error") }],
    }));
    expect(failed.status).toBe(400);
    expect(JSON.parse(failed.body)).toEqual({ error: "the workflow failed before responding: see its $errors" });
    const late = await respond(async (invocation) => ({
      steps: [{ ...ok(ids(invocation)[0] as string), status: "error", error: thrown("TimeoutError") }],
    }));
    expect(late.status).toBe(504);
  });

  it("ends the run by the caller's deadline when that comes before its time limit (AWS's endpoint function)", async () => {
    const limits: number[] = [];
    const t = await setUp({
      customResponse: true,
      script: async (invocation) => {
        limits.push(invocation.timeoutMs);
        return {};
      },
    });
    await receiveHttpRequest(t.deps, t.key, POST(), undefined, t.deps.clock.nowMs() + 1_500);
    await receiveHttpRequest(t.deps, t.key, POST(), undefined, t.deps.clock.nowMs() + 600_000);
    expect(limits).toEqual([1_500, t.deps.runtime.invocationTimeoutMs]);
  });

  it("answers a response given before a later step failed, and 502 for a response it refuses", async () => {
    const early = await respond(async (invocation) => ({
      response: { status: 202, headers: {}, body: "early" },
      steps: [
        ok(ids(invocation)[0] as string),
        { ...ok(ids(invocation)[1] as string), status: "error", error: thrown("Error") },
      ],
    }));
    expect(early).toMatchObject({ status: 202, body: "early" });
    const refused = await respond(async () => ({
      response: { status: 99, headers: {}, body: "" },
    }));
    expect(refused.status).toBe(502);
  });
});

describe("a workflow's HTTP trigger, like a source's endpoint", () => {
  it("answers OPTIONS, a body over 512 KiB and a delivery loop without running anything", async () => {
    const t = await setUp({ customResponse: true });
    const options = await receiveHttpRequest(t.deps, t.key, { ...POST(), method: "OPTIONS" });
    expect(options.status).toBe(204);
    const big = await receiveHttpRequest(t.deps, t.key, { ...POST(), body: Buffer.alloc(512 * 1024 + 1) });
    expect(big.status).toBe(413);
    const loop = await receiveHttpRequest(t.deps, t.key, { ...POST(), headers: { [HOPS_HEADER]: "6" } });
    expect(loop.status).toBe(508);
    expect(t.workflowCalls).toEqual([]);
    expect(await t.runs()).toEqual([]);
  });

  it("carries the request's hops to the job and to every event the run stores", async () => {
    const t = await setUp({ script: async () => ({ sends: [{ type: "emit", raw_event: 1 }] }) });
    await receiveHttpRequest(t.deps, t.key, { ...POST(), headers: { [HOPS_HEADER]: "2" } });
    expect(t.jobs[0]).toMatchObject({ hops: 2 });
    await runQueuedJob(t.deps, t.jobs[0] as RunJob);
    const [event] = await t.events("");
    expect(event && hopsOf(event)).toBe(2);
  });

  it("fails a custom-response run of a $.service.db workflow that cannot start in time with 504, running nothing", async () => {
    const t = await setUp({ customResponse: true, props: [DB] });
    t.deps.runLock = { acquire: async () => undefined };
    const answer = await receiveHttpRequest(t.deps, t.key, POST());
    expect(answer.status).toBe(504);
    expect(t.workflowCalls).toEqual([]);
    expect((await t.runs())[0]).toMatchObject({ status: "error", error: { code: "TimeoutError", cellId: "" } });
  });
});

describe("quotas of workflow runs", () => {
  it("refuses an HTTP request over the runs-per-minute quota with 429, noting it once on $errors", async () => {
    const t = await setUp();
    t.deps.quotas.runsPerMinute = 1;
    expect((await receiveHttpRequest(t.deps, t.key, POST())).status).toBe(200);
    expect((await receiveHttpRequest(t.deps, t.key, POST())).status).toBe(429);
    expect((await receiveHttpRequest(t.deps, t.key, POST())).status).toBe(429);
    expect(t.jobs).toHaveLength(1);
    const notices = await t.events("$errors");
    expect(notices.map((event) => (event.event as { error: { code: string; cellId: string } }).error)).toEqual([
      expect.objectContaining({ code: "QuotaExceededError", cellId: "" }),
    ]);
  });

  it("drops a timer or event run over a quota; an HTTP job admitted on arrival still runs", async () => {
    const t = await setUp();
    t.deps.quotas.runsPerMinute = 1;
    await receiveHttpRequest(t.deps, t.key, POST());
    const event: WorkflowRunJob = {
      kind: "workflow",
      workflowId: t.workflow.id,
      runId: runIdFor(0, t.workflow.id, "dc_x", "e1"),
      trigger: "event",
      triggerId: "dc_x",
      event: { a: 1 },
    };
    await runQueuedJob(t.deps, event);
    expect(t.workflowCalls).toHaveLength(0);
    await runQueuedJob(t.deps, t.jobs[0] as RunJob);
    expect(t.workflowCalls).toHaveLength(1);
  });
});

describe("GET /v1/workflows/{id}/runs", () => {
  it("lists the runs newest first to a member of the workspace, and answers not found to anyone else", async () => {
    const t = await setUp();
    await t.runOnce();
    t.deps.clock.set(t.deps.clock.nowMs() + 1_000);
    await t.runOnce();
    const page = await listWorkflowRuns(t.deps, { userId: t.account.user.id }, t.workflow.id, { limit: 10 });
    expect(page.data.map((run) => run.id)).toEqual(t.jobs.map((job) => (job as WorkflowRunJob).runId).reverse());
    expect(page.page_info).toMatchObject({ total_count: 2, count: 2 });
    expect(page.data[1]).toMatchObject({
      workflow_id: t.workflow.id,
      deployment_id: t.workflow.deploymentId,
      status: "success",
      attempts: 1,
      started_at_ms: Date.UTC(2026, 10, 26, 9),
      error: null,
      steps: [{ namespace: "parse", status: "success", duration_ms: 1, export_bytes: 0, summary: null }, {}, {}],
    });
    const mallory = await accountIn(t.deps, "mallory");
    await expect(
      listWorkflowRuns(t.deps, { userId: mallory.user.id }, t.workflow.id, { limit: 10 }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(
      listWorkflowRuns(t.deps, { userId: t.account.user.id }, "p_missing", { limit: 10 }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
  });
});
