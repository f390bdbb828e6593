import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  ServiceQuotaExceededException,
  UpdateScheduleCommand,
} from "@aws-sdk/client-scheduler";
import { mockClient } from "aws-sdk-client-mock";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import {
  pausedRunScheduleName,
  SCHEDULE_DELETES_PER_REMOVAL,
  SchedulerPausedRuns,
} from "#adapters/aws/scheduler-paused-runs";
import { SqlitePausedRuns } from "#adapters/local/sqlite-paused-runs";
import type { Logger } from "#core/ports/logger";
import type { PausedRun } from "#core/ports/paused-runs";
import type { RunJob } from "#core/ports/run-queue";
import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";
import { keepPause, newFlowBase } from "#core/workflow-pauses";
import { pausedRunDispatcher } from "#internal/paused-run-dispatcher";
import { runJobSchema } from "#internal/source-runner";
import { memoryDeps } from "../../support/memory-deps.ts";

const schedulerMock = mockClient(SchedulerClient);
afterAll(() => schedulerMock.restore());
const DISPATCHER = "arn:aws:lambda:eu-west-1:123456789012:function:sluice-dev-paused-run-dispatcher";
const ROLE = "arn:aws:iam::123456789012:role/SluiceService-SchedulerRole";
const START = Date.UTC(2026, 10, 27, 12);
const client = () =>
  new SchedulerClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });
const sdkError = <T extends new (options: never) => Error>(type: T, name: string) =>
  new type({ $metadata: {}, message: name } as never);

/** Local stores whose pauses go through `SchedulerPausedRuns`, and a run queue that records its jobs. */
function setUp(options: { target?: boolean; group?: boolean } = {}) {
  const queued: RunJob[] = [];
  const warnings: { message: string; fields: unknown }[] = [];
  const log: Logger = {
    debug() {},
    info() {},
    warn: (message, fields) => void warnings.push({ message, fields }),
    error: (message, fields) => void warnings.push({ message, fields }),
    child: () => log,
  };
  const deps = memoryDeps(START, { runs: { enqueue: async (job) => void queued.push(job) } });
  const rows = new SqlitePausedRuns(deps.sqlite);
  const store = new SchedulerPausedRuns({
    rows,
    scheduler: client(),
    ...(options.group === false ? {} : { groupName: "sluice-dev" }),
    ...(options.target === false ? {} : { target: { dispatcherArn: DISPATCHER, roleArn: ROLE } }),
    clock: deps.clock,
    log,
  });
  deps.pausedRuns = store;
  /** The dispatcher's Lambda handler on these stores, as Scheduler invokes it. */
  const fire = (input: unknown) => pausedRunDispatcher(async () => deps)(input);
  return { deps, rows, store, queued, warnings, fire };
}

/** What a step's `$.flow.delay(afterMs)` (or `suspend`) keeps, through the core's `keepPause`. */
async function pauseRun(
  deps: ReturnType<typeof setUp>["deps"],
  runId: string,
  kind: PausedRun["kind"],
  afterMs: number,
) {
  const workflow = { id: "p_a", deploymentId: "d_1", steps: [{ id: "c_wait", namespace: "wait" }] } as WorkflowRecord;
  const run = { id: runId, trigger: { type: "timer", id: "ti_1" } } as WorkflowRun;
  return keepPause(
    deps,
    workflow,
    { kind: "workflow", workflowId: "p_a", runId, trigger: "timer", triggerId: "ti_1", event: { tick: 1 } },
    run,
    newFlowBase(deps, runId),
    { kind, stepId: "c_wait", afterMs, steps: { wait: { $return_value: 1 } } },
    undefined,
    "k_1",
    deps.clock.nowMs(),
  );
}

const requests = <T>(command: new (input: never) => T) =>
  schedulerMock.commandCalls(command as never).map((call) => (call.args[0] as { input: unknown }).input);

describe("SchedulerPausedRuns: paused runs on AWS", () => {
  beforeEach(() => {
    schedulerMock.reset();
    schedulerMock.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:aws:scheduler:::schedule/x" });
    schedulerMock.on(UpdateScheduleCommand).resolves({ ScheduleArn: "arn:aws:scheduler:::schedule/x" });
    schedulerMock.on(DeleteScheduleCommand).resolves({});
  });

  it("keeps a pause with a one-time schedule at its time, whose firing dispatches it and queues its continuation", async () => {
    const t = setUp();
    expect(await pauseRun(t.deps, "run_a", "delay", 90_500)).toBeUndefined();
    expect(requests(CreateScheduleCommand)).toEqual([
      {
        Name: "pr-run_a",
        GroupName: "sluice-dev",
        // Rounded up to the second: never early.
        ScheduleExpression: `at(${new Date(START + 91_000).toISOString().slice(0, 19)})`,
        ScheduleExpressionTimezone: "UTC",
        FlexibleTimeWindow: { Mode: "OFF" },
        State: "ENABLED",
        ActionAfterCompletion: "DELETE",
        Description: "Sluice paused run run_a of p_a",
        Target: {
          Arn: DISPATCHER,
          RoleArn: ROLE,
          Input: JSON.stringify({ pauseId: "run_a" }),
          RetryPolicy: { MaximumEventAgeInSeconds: 86_400, MaximumRetryAttempts: 185 },
        },
      },
    ]);
    expect((await t.rows.get("run_a"))?.dueMs).toBe(START + 90_500);

    // Scheduler invokes the dispatcher with the schedule's input, as Lambda passes it.
    t.deps.clock.set(START + 91_000);
    const input = JSON.parse(
      String((requests(CreateScheduleCommand)[0] as { Target: { Input: string } }).Target.Input),
    );
    await t.fire(input);
    expect((await t.rows.get("run_a"))?.dispatch).toEqual({ how: "due", atMs: START + 91_000 });
    expect(t.queued).toEqual([
      expect.objectContaining({ kind: "workflow", workflowId: "p_a", event: null, resume: { pauseId: "run_a" } }),
    ]);
    // The job the source runner gets keeps the pause it goes on from.
    expect(runJobSchema.parse(JSON.parse(JSON.stringify(t.queued[0])))).toEqual(t.queued[0]);
    // Delivered twice (Scheduler and Lambda deliver at least once): the same continuation, which runs once.
    await t.fire(input);
    expect(t.queued).toHaveLength(2);
    expect(t.queued[1]).toEqual(t.queued[0]);

    // Its continuation ended: the row goes, and the schedule (gone already, as it fired) is fine.
    schedulerMock.on(DeleteScheduleCommand).rejects(sdkError(ResourceNotFoundException, "ResourceNotFoundException"));
    expect(await t.deps.pausedRuns.remove("run_a")).toBe(true);
    expect(requests(DeleteScheduleCommand)).toEqual([{ Name: "pr-run_a", GroupName: "sluice-dev" }]);
    expect(await t.rows.get("run_a")).toBeUndefined();
    expect(t.warnings).toEqual([]);
    // A schedule that fires for a pause that is gone dispatches nothing.
    await t.fire(input);
    expect(t.queued).toHaveLength(2);
  });

  it("moves the schedule of a run that paused again under the same id (done again after a crash) to its new time", async () => {
    const t = setUp();
    await pauseRun(t.deps, "run_a", "delay", 60_000);
    schedulerMock.on(CreateScheduleCommand).rejects(sdkError(ConflictException, "ConflictException"));
    t.deps.clock.set(START + 5_000);
    await pauseRun(t.deps, "run_a", "delay", 60_000);
    const [update] = requests(UpdateScheduleCommand) as { Name: string; ScheduleExpression: string }[];
    expect(update).toEqual(requests(CreateScheduleCommand)[1]);
    expect(update?.Name).toBe("pr-run_a");
    expect(update?.ScheduleExpression).toBe(`at(${new Date(START + 65_000).toISOString().slice(0, 19)})`);
    expect((await t.rows.get("run_a"))?.dueMs).toBe(START + 65_000);
  });

  it("forgets a pause whose schedule could not be made, and fails the pause", async () => {
    const t = setUp();
    schedulerMock
      .on(CreateScheduleCommand)
      .rejects(sdkError(ServiceQuotaExceededException, "ServiceQuotaExceededException"));
    await expect(pauseRun(t.deps, "run_a", "suspend", 60_000)).rejects.toThrow("ServiceQuotaExceededException");
    expect(await t.rows.get("run_a")).toBeUndefined();
    expect(await t.store.countPending("p_a")).toBe(0);
  });

  it("deletes the schedules of a deleted workflow's pauses: one gone is fine, another failure is logged, not thrown", async () => {
    const t = setUp();
    for (const id of ["run_a", "run_b", "run_c"]) await pauseRun(t.deps, id, "suspend", 60_000);
    schedulerMock
      .on(DeleteScheduleCommand, { Name: "pr-run_b" })
      .rejects(sdkError(ResourceNotFoundException, "ResourceNotFoundException"))
      .on(DeleteScheduleCommand, { Name: "pr-run_c" })
      .rejects(new Error("throttled"));
    expect((await t.store.removeWorkflow("p_a")).sort()).toEqual(["run_a", "run_b", "run_c"]);
    expect((requests(DeleteScheduleCommand) as { Name: string }[]).map((input) => input.Name).sort()).toEqual([
      "pr-run_a",
      "pr-run_b",
      "pr-run_c",
    ]);
    expect(t.warnings).toEqual([
      {
        message: "schedule of a forgotten paused run not deleted",
        fields: { schedule: "pr-run_c", error: "Error: throttled" },
      },
    ]);
    expect(await t.store.countPending("p_a")).toBe(0);
    // Nothing to forget: no request.
    expect(await t.store.removeWorkflow("p_a")).toEqual([]);
    expect(requests(DeleteScheduleCommand)).toHaveLength(3);
  });

  it("deletes at most SCHEDULE_DELETES_PER_REMOVAL schedules of a deleted workflow inside the request, and says how many it left", async () => {
    const t = setUp();
    const ids = Array.from({ length: SCHEDULE_DELETES_PER_REMOVAL + 3 }, (_, i) => `run_${String(i).padStart(4, "0")}`);
    for (const id of ids) await pauseRun(t.deps, id, "suspend", 60_000);
    expect((await t.store.removeWorkflow("p_a")).sort()).toEqual(ids);
    expect(requests(DeleteScheduleCommand)).toHaveLength(SCHEDULE_DELETES_PER_REMOVAL);
    expect(t.warnings).toEqual([
      {
        message: "schedules of a deleted workflow's paused runs left to fire for nothing",
        fields: { workflow_id: "p_a", left: 3 },
      },
    ]);
    expect(await t.store.countPending("p_a")).toBe(0);
  });

  it("refuses to pause where the function has no dispatcher to schedule, before keeping anything", async () => {
    const t = setUp({ target: false });
    await expect(pauseRun(t.deps, "run_a", "delay", 1_000)).rejects.toThrow(/without the paused-run dispatcher's ARN/);
    expect(await t.rows.get("run_a")).toBeUndefined();
    expect(requests(CreateScheduleCommand)).toEqual([]);
  });

  it("names a schedule after its run, or a digest where the run id is no valid schedule name", () => {
    expect(pausedRunScheduleName("run_0abc")).toBe("pr-run_0abc");
    const long = `run_${"a".repeat(64)}`;
    expect(pausedRunScheduleName(long)).toMatch(/^pr-[0-9a-f]{40}$/);
  });
});

describe("the paused-run dispatcher (AWS)", () => {
  it("drops a malformed event, and does nothing for a pause that is not there", async () => {
    const t = setUp();
    const errors: string[] = [];
    t.deps.log = { ...t.deps.log, error: (message: string) => void errors.push(message) } as Logger;
    await t.fire({ pauseId: "not-a-run" });
    await t.fire({ pauseId: "run_a", extra: 1 });
    expect(errors).toEqual(["malformed paused run dispatch dropped", "malformed paused run dispatch dropped"]);
    await t.fire({ pauseId: "run_zz" });
    expect(t.queued).toEqual([]);
  });
});
