import { describe, expect, it } from "vitest";
import type { TimerSpec } from "#core/component-model";
import type { RunJob, WorkflowRunJob } from "#core/ports/run-queue";
import type { TimerTarget } from "#core/ports/timers";
import { timerRunEvent } from "#core/timer-schedule";
import { runWorkflow } from "#core/workflow-runs";
import { fireTimerTarget, fireWorkflowTimer, timerRunId, workflowTimerEvent, zonedTime } from "#core/workflow-timers";
import { createWorkflow, deleteWorkflow, updateWorkflow } from "#core/workflows";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

/**
 * Timer triggers of workflows on the real local stores and a scripted host: the tick's event, the
 * queued run and its run id, and what create, PUT and delete ask of the `Timers` port. The real
 * timers and sandbox run in test/e2e/workflows-timers.test.ts.
 */
const T0 = Date.UTC(2026, 10, 26, 9); // a Thursday, 09:00 UTC

type TimerCall = { op: "schedule"; target: TimerTarget; spec: TimerSpec } | { op: "cancel"; target: TimerTarget };

async function setUp() {
  const { host, workflowCalls } = scriptedHost({}, undefined, async () => ({}));
  const jobs: RunJob[] = [];
  const timerCalls: TimerCall[] = [];
  const deps = memoryDeps(T0, {
    host,
    runs: { enqueue: async (job) => void jobs.push(job) },
    timers: {
      schedule: async (target, spec) => void timerCalls.push({ op: "schedule", target, spec }),
      cancel: async (target) => void timerCalls.push({ op: "cancel", target }),
    },
  });
  const account = await accountIn(deps, "alice");
  const caller = { userId: account.user.id };
  /** A workflow of one code step and the given timers; active unless told. */
  const create = (timers: Record<string, unknown>[], active = true) =>
    createWorkflow(deps, caller, {
      settings: { name: "Ticks", auto_deploy: active },
      steps: [{ namespace: "tick", component_code: "export default defineComponent({ async run() {} })" }],
      triggers: timers.map((props) => ({ type: "timer", props })),
    });
  const drain = () => {
    const taken = jobs.splice(0);
    timerCalls.splice(0);
    return taken;
  };
  return { deps, caller, jobs, timerCalls, workflowCalls, create, drain };
}

const timerIds = (view: { triggers: unknown[] }) => view.triggers.map((trigger) => (trigger as { id: string }).id);

describe("workflowTimerEvent", () => {
  it("is a source's timer event plus the tick's time in UTC, for a timer that names no zone", () => {
    const event = workflowTimerEvent({ intervalSeconds: 60 }, T0);
    const utc = {
      timezone: "UTC",
      iso8601: {
        timestamp: "2026-11-26T09:00:00.000+00:00",
        date: "2026-11-26",
        time: "09:00:00.000",
        tz_offset: "+00:00",
      },
      year: 2026,
      month: 11,
      day_of_month: 26,
      day_of_week: "Thursday",
      hour: 9,
      minute: 0,
      second: 0,
    };
    expect(event).toEqual({ timestamp: T0 / 1000, interval_seconds: 60, timezone_configured: utc, timezone_utc: utc });
  });

  it("keeps a cron timer's fields as a source gets them and shows the tick in the timer's zone", () => {
    const spec = { cron: "0 10 * * *", timezone: "Europe/Paris" };
    const event = workflowTimerEvent(spec, T0) as Record<string, unknown>;
    expect(event).toMatchObject({ ...timerRunEvent(spec, T0) });
    expect(event).toMatchObject({ cron: "0 10 * * *", timezone: "Europe/Paris", interval_seconds: 86_400 });
    expect(event.timezone_configured).toMatchObject({
      timezone: "Europe/Paris",
      iso8601: { timestamp: "2026-11-26T10:00:00.000+01:00", tz_offset: "+01:00" },
      hour: 10,
    });
    expect(event.timezone_utc).toMatchObject({ iso8601: { timestamp: "2026-11-26T09:00:00.000+00:00" }, hour: 9 });
  });

  it("follows summer time, negative and half-hour offsets, and the zone's own date", () => {
    const at = Date.parse("2026-07-01T22:30:00.250Z");
    expect(zonedTime(at, "Europe/Paris").iso8601).toEqual({
      timestamp: "2026-07-02T00:30:00.250+02:00",
      date: "2026-07-02",
      time: "00:30:00.250",
      tz_offset: "+02:00",
    });
    expect(zonedTime(at, "America/New_York")).toMatchObject({
      iso8601: { timestamp: "2026-07-01T18:30:00.250-04:00" },
      day_of_month: 1,
      day_of_week: "Wednesday",
    });
    expect(zonedTime(at, "Asia/Kolkata")).toMatchObject({
      iso8601: { timestamp: "2026-07-02T04:00:00.250+05:30" },
      day_of_week: "Thursday",
      hour: 4,
      minute: 0,
    });
  });
});

describe("fireWorkflowTimer", () => {
  it("queues a timer run with the tick's event and a run id made from the timer and the slot", async () => {
    const { deps, create, drain, jobs } = await setUp();
    const workflow = await create([{ intervalSeconds: 30 }]);
    const [timerId] = timerIds(workflow) as [string];
    drain();
    const job = await fireWorkflowTimer(deps, workflow.id, timerId, T0 + 30_000);
    const expected: WorkflowRunJob = {
      kind: "workflow",
      workflowId: workflow.id,
      runId: timerRunId(timerId, T0 + 30_000),
      trigger: "timer",
      triggerId: timerId,
      event: workflowTimerEvent({ intervalSeconds: 30 }, T0 + 30_000),
    };
    expect(job).toEqual(expected);
    expect(jobs).toEqual([expected]);
    expect(expected.runId).toMatch(/^run_/);
    // Another slot of the same timer, or the same slot of another timer, is another run.
    expect(timerRunId(timerId, T0 + 60_000)).not.toBe(expected.runId);
    expect(timerRunId("ti_other", T0 + 30_000)).not.toBe(expected.runId);
  });

  it("runs a tick fired twice once (Scheduler delivers at least once)", async () => {
    const { deps, create, drain, jobs, workflowCalls } = await setUp();
    const workflow = await create([{ cron: "*/5 * * * *" }]);
    const [timerId] = timerIds(workflow) as [string];
    drain();
    await fireWorkflowTimer(deps, workflow.id, timerId, T0);
    await fireWorkflowTimer(deps, workflow.id, timerId, T0);
    await fireWorkflowTimer(deps, workflow.id, timerId, T0 + 300_000);
    const [first, repeat, next] = jobs as [WorkflowRunJob, WorkflowRunJob, WorkflowRunJob];
    expect(repeat.runId).toBe(first.runId);
    expect(await runWorkflow(deps, first)).toMatchObject({ outcome: "ran", run: { status: "success" } });
    expect(await runWorkflow(deps, repeat)).toEqual({ outcome: "done" });
    expect(await runWorkflow(deps, next)).toMatchObject({ outcome: "ran" });
    expect(workflowCalls).toHaveLength(2);
    expect(workflowCalls[0]?.trigger.event).toEqual(first.event);
    expect(workflowCalls[0]?.context).toMatchObject({ source_type: "TIMER", workflow_id: workflow.id });
    const runs = await deps.workflowRuns.listRuns(workflow.id, { limit: 10 });
    expect(runs.items.map((run) => [run.id, run.trigger])).toEqual(
      expect.arrayContaining([
        [first.runId, { type: "timer", id: timerId }],
        [next.runId, { type: "timer", id: timerId }],
      ]),
    );
    expect(runs.items).toHaveLength(2);
  });

  it("queues nothing for an inactive or deleted workflow, or a timer it no longer has", async () => {
    const { deps, caller, create, drain, jobs } = await setUp();
    const inactive = await create([{ intervalSeconds: 60 }], false);
    const active = await create([{ intervalSeconds: 60 }]);
    drain();
    expect(await fireWorkflowTimer(deps, inactive.id, timerIds(inactive)[0] as string, T0)).toBeUndefined();
    expect(await fireWorkflowTimer(deps, active.id, "ti_01kab00000abcdefghjkmn", T0)).toBeUndefined();
    // A timer id of another workflow is not this one's.
    expect(await fireWorkflowTimer(deps, active.id, timerIds(inactive)[0] as string, T0)).toBeUndefined();
    await deleteWorkflow(deps, caller, active.id);
    expect(await fireWorkflowTimer(deps, active.id, timerIds(active)[0] as string, T0)).toBeUndefined();
    expect(jobs).toEqual([]);
  });
});

describe("fireTimerTarget", () => {
  it("fires a workflow target's timer and a source target's source", async () => {
    const { deps, create, drain, jobs } = await setUp();
    const workflow = await create([{ intervalSeconds: 60 }]);
    const [timerId] = timerIds(workflow) as [string];
    drain();
    await fireTimerTarget(deps, { workflowId: workflow.id, timerId }, T0);
    expect(jobs).toMatchObject([{ kind: "workflow", workflowId: workflow.id, triggerId: timerId }]);
    // A source that does not exist is skipped by fireTimer, queueing nothing.
    await expect(fireTimerTarget(deps, { sourceId: "dc_01kab00000abcdefghjkmn" }, T0)).resolves.toBeUndefined();
    expect(jobs).toHaveLength(1);
  });
});

describe("timers of workflows through create, PUT and delete", () => {
  it("schedules an active workflow's timers at create, under their ti_ ids, and nothing for an inactive one", async () => {
    const { create, timerCalls } = await setUp();
    const inactive = await create([{ intervalSeconds: 60 }], false);
    expect(inactive.active).toBe(false);
    expect(timerCalls).toEqual([]);
    const workflow = await create([{ intervalSeconds: 60 }, { cron: "0 9 * * 1", timezone: "Europe/Paris" }]);
    const [interval, cron] = timerIds(workflow) as [string, string];
    expect(timerCalls).toEqual([
      { op: "schedule", target: { workflowId: workflow.id, timerId: interval }, spec: { intervalSeconds: 60 } },
      {
        op: "schedule",
        target: { workflowId: workflow.id, timerId: cron },
        spec: { cron: "0 9 * * 1", timezone: "Europe/Paris" },
      },
    ]);
  });

  it("cancels on deactivation, schedules again on activation, and does nothing for a repeated state", async () => {
    const { deps, caller, create, drain, timerCalls } = await setUp();
    const workflow = await create([{ intervalSeconds: 5 }]);
    const target = { workflowId: workflow.id, timerId: timerIds(workflow)[0] as string };
    drain();
    await updateWorkflow(deps, caller, workflow.id, { active: false });
    expect(timerCalls).toEqual([{ op: "cancel", target }]);
    await updateWorkflow(deps, caller, workflow.id, { active: false });
    expect(timerCalls).toHaveLength(1);
    await updateWorkflow(deps, caller, workflow.id, { active: true });
    await updateWorkflow(deps, caller, workflow.id, { active: true });
    expect(timerCalls).toEqual([
      { op: "cancel", target },
      { op: "schedule", target, spec: { intervalSeconds: 5 } },
    ]);
    // Steps and the name change no timer.
    await updateWorkflow(deps, caller, workflow.id, { settings: { name: "Renamed" } });
    expect(timerCalls).toHaveLength(2);
  });

  it("leaves a kept timer alone when a PUT of triggers keeps its spec, replaces a changed one, cancels a dropped one", async () => {
    const { deps, caller, create, drain, timerCalls } = await setUp();
    const workflow = await create([{ intervalSeconds: 60 }, { intervalSeconds: 120 }, { cron: "0 9 * * *" }]);
    const [first, second, third] = timerIds(workflow) as [string, string, string];
    const target = (timerId: string) => ({ workflowId: workflow.id, timerId });
    drain();

    // The same definition again: ids kept by position, nothing rescheduled.
    const same = await updateWorkflow(deps, caller, workflow.id, {
      triggers: [
        { type: "timer", props: { intervalSeconds: 60 } },
        { type: "timer", props: { intervalSeconds: 120 } },
        { type: "timer", props: { cron: "0 9 * * *" } },
      ],
    });
    expect(timerIds(same)).toEqual([first, second, third]);
    expect(timerCalls).toEqual([]);

    // The second changes, the third goes, a new one comes.
    const changed = await updateWorkflow(deps, caller, workflow.id, {
      triggers: [
        { type: "timer", props: { intervalSeconds: 60 } },
        { type: "timer", props: { intervalSeconds: 90 } },
        { type: "http", props: {} },
      ],
    });
    expect(timerIds(changed).slice(0, 2)).toEqual([first, second]);
    expect(timerCalls).toEqual([
      { op: "cancel", target: target(third) },
      { op: "schedule", target: target(second), spec: { intervalSeconds: 90 } },
    ]);
    timerCalls.splice(0);

    const added = await updateWorkflow(deps, caller, workflow.id, {
      triggers: [
        { type: "timer", props: { intervalSeconds: 60 } },
        { type: "timer", props: { intervalSeconds: 90 } },
        { type: "timer", props: { intervalSeconds: 3600 } },
      ],
    });
    const fresh = timerIds(added)[2] as string;
    expect([first, second, third]).not.toContain(fresh);
    expect(timerCalls).toEqual([{ op: "schedule", target: target(fresh), spec: { intervalSeconds: 3600 } }]);
  });

  it("schedules nothing when an inactive workflow's triggers are replaced, and the new ones on activation", async () => {
    const { deps, caller, create, timerCalls } = await setUp();
    const workflow = await create([{ intervalSeconds: 60 }], false);
    const replaced = await updateWorkflow(deps, caller, workflow.id, {
      triggers: [{ type: "timer", props: { intervalSeconds: 30 } }],
    });
    expect(timerCalls).toEqual([]);
    await updateWorkflow(deps, caller, workflow.id, { active: true });
    expect(timerCalls).toEqual([
      {
        op: "schedule",
        target: { workflowId: workflow.id, timerId: timerIds(replaced)[0] as string },
        spec: { intervalSeconds: 30 },
      },
    ]);
  });

  it("cancels every timer at delete, active or not", async () => {
    const { deps, caller, create, drain, timerCalls } = await setUp();
    const active = await create([{ intervalSeconds: 60 }, { intervalSeconds: 30 }]);
    const inactive = await create([{ intervalSeconds: 60 }], false);
    drain();
    await deleteWorkflow(deps, caller, active.id);
    await deleteWorkflow(deps, caller, inactive.id);
    expect(timerCalls).toEqual([
      ...timerIds(active).map((timerId) => ({ op: "cancel", target: { workflowId: active.id, timerId } })),
      { op: "cancel", target: { workflowId: inactive.id, timerId: timerIds(inactive)[0] } },
    ]);
  });
});
