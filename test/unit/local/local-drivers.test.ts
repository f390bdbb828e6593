import { describe, expect, it } from "vitest";
import { jsonLogger } from "#core/ports/logger";
import type { RunJob } from "#core/ports/run-queue";
import { timerRunId } from "#core/workflow-timers";
import { createWorkflow, updateWorkflow } from "#core/workflows";
import { localDrivers } from "#local-mode/drivers/source-runner";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

/**
 * Local mode's drivers with a queue that runs each job as soon as it is queued (as `SqliteRunQueue`
 * does with free slots) and workflow runs that last until the test lets them end: a workflow
 * timer's tick is skipped while an earlier tick of the same timer is queued or running (decision
 * 28's rule, which `LocalTimers` alone would apply to the enqueue only).
 */
const T0 = Date.UTC(2026, 10, 26, 9);

async function setUp() {
  const releases: (() => void)[] = [];
  const { host, workflowCalls } = scriptedHost(
    {},
    undefined,
    () => new Promise((resolve) => releases.push(() => resolve({}))),
  );
  const lines: Record<string, unknown>[] = [];
  const queued: RunJob[] = [];
  const running: Promise<unknown>[] = [];
  let refuse = false;
  const deps = memoryDeps(T0, {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
    runs: {
      enqueue: async (job) => {
        if (refuse) throw new Error("the data dir is full");
        queued.push(job);
        running.push(drivers.run(job));
      },
    },
  });
  const drivers = localDrivers(
    () => deps,
    jsonLogger({}, (line) => lines.push(JSON.parse(line))),
  );
  const account = await accountIn(deps, "alice");
  const caller = { userId: account.user.id };
  const workflow = await createWorkflow(deps, caller, {
    settings: { name: "Slow", auto_deploy: true },
    steps: [{ namespace: "slow", component_code: "export default defineComponent({ async run() {} })" }],
    triggers: [
      { type: "timer", props: { intervalSeconds: 1 } },
      { type: "timer", props: { intervalSeconds: 1 } },
    ],
  });
  const [first, second] = workflow.triggers.map((trigger) => ({
    workflowId: workflow.id,
    timerId: (trigger as { id: string }).id,
  })) as [{ workflowId: string; timerId: string }, { workflowId: string; timerId: string }];
  /** Lets every run started so far end, and waits until they are applied. */
  const finishRuns = async () => {
    for (const release of releases.splice(0)) release();
    await Promise.all(running.splice(0));
  };
  const started = () => workflowCalls.length;
  const until = async (condition: () => boolean) => {
    for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  /** Lets the earliest run still going end. */
  const finishFirst = () => releases.shift()?.();
  return {
    deps,
    caller,
    drivers,
    finishFirst,
    lines,
    queued,
    first,
    second,
    finishRuns,
    started,
    until,
    refuseEnqueues: (value: boolean) => {
      refuse = value;
    },
  };
}

describe("localDrivers: workflow timer ticks", () => {
  it("skips a tick while the timer's previous run is still going, with a warning, and fires again once it ended", async () => {
    const { drivers, lines, queued, first, second, finishRuns, started, until } = await setUp();
    await drivers.fire(first, T0 + 1000);
    await until(() => started() === 1);
    await drivers.fire(first, T0 + 2000);
    await drivers.fire(first, T0 + 3000);
    // Another timer of the same workflow is not held back by the first one's run.
    await drivers.fire(second, T0 + 2000);
    expect(queued.map((job) => job.kind === "workflow" && [job.triggerId, job.event])).toEqual([
      [first.timerId, expect.objectContaining({ timestamp: (T0 + 1000) / 1000 })],
      [second.timerId, expect.objectContaining({ timestamp: (T0 + 2000) / 1000 })],
    ]);
    const skipped = lines.filter((line) => line.level === "warn" && /skipped/.test(String(line.message)));
    expect(skipped).toEqual([
      expect.objectContaining({ ...first, scheduledAt: new Date(T0 + 2000).toISOString() }),
      expect.objectContaining({ ...first, scheduledAt: new Date(T0 + 3000).toISOString() }),
    ]);

    await until(() => started() === 2);
    await finishRuns();
    await drivers.fire(first, T0 + 4000);
    expect(queued).toHaveLength(3);
    await until(() => started() === 3);
    await finishRuns();
  });

  it("holds nothing for a tick that queued no run, or whose enqueue failed", async () => {
    const { deps, caller, drivers, queued, first, finishRuns, refuseEnqueues, started, until } = await setUp();
    refuseEnqueues(true);
    await expect(drivers.fire(first, T0 + 1000)).rejects.toThrow("the data dir is full");
    refuseEnqueues(false);
    await updateWorkflow(deps, caller, first.workflowId, { active: false });
    await drivers.fire(first, T0 + 2000); // inactive: no run
    await updateWorkflow(deps, caller, first.workflowId, { active: true });
    await drivers.fire(first, T0 + 3000);
    expect(queued).toHaveLength(1);
    await until(() => started() === 1);
    await finishRuns();
  });

  it("keeps holding a tick back while its run goes, when a job a previous process left ends meanwhile", async () => {
    const { drivers, queued, lines, first, finishFirst, finishRuns, started, until } = await setUp();
    // The job the killed process had queued, run again at start: this process never queued it.
    const left: RunJob = {
      kind: "workflow",
      workflowId: first.workflowId,
      runId: timerRunId(first.timerId, T0),
      trigger: "timer",
      triggerId: first.timerId,
      event: {},
    };
    const leftover = drivers.run(left);
    await until(() => started() === 1);
    await drivers.fire(first, T0 + 1000);
    await until(() => started() === 2);
    // The leftover ends while this process's tick still runs: the next tick is held back all the same.
    finishFirst();
    await leftover;
    await drivers.fire(first, T0 + 2000);
    expect(queued.map((job) => job.kind === "workflow" && job.runId)).toEqual([timerRunId(first.timerId, T0 + 1000)]);
    expect(lines.filter((line) => /skipped/.test(String(line.message)))).toHaveLength(1);
    await finishRuns();
    await drivers.fire(first, T0 + 3000);
    await until(() => started() === 3);
    await drivers.fire(first, T0 + 4000);
    expect(queued).toHaveLength(2);
    await finishRuns();
  });

  it("fires a source's timer through fireTimer, never counted", async () => {
    const { drivers, queued } = await setUp();
    // A source that does not exist is skipped by fireTimer; the call settles and queues nothing.
    await drivers.fire({ sourceId: "dc_01kab00000abcdefghjkmn" }, T0);
    await drivers.fire({ sourceId: "dc_01kab00000abcdefghjkmn" }, T0 + 1000);
    expect(queued).toEqual([]);
  });
});
