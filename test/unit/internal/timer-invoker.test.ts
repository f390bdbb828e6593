import { describe, expect, it } from "vitest";
import { type TimerTarget, timerTargetOf } from "#core/ports/timers";
import { fireScheduledRuns, scheduledTimes, timerInvokerInputSchema } from "#internal/timer-invoker";

const SOURCE = "dc_01kab00000abcdefghjkmn";
const WORKFLOW = "p_01kab00000abcdefghjkmn";
const TIMER = "ti_01kab00000abcdefghjkmp";
const AT = Date.parse("2026-11-20T10:00:00Z");

/** A clock that only moves when the code sleeps. */
function fakeTime(start: number) {
  let now = start;
  const sleeps: number[] = [];
  return {
    clock: { nowMs: () => now },
    sleep: async (ms: number) => {
      sleeps.push(ms);
      now += ms;
    },
    sleeps,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("timerInvokerInputSchema", () => {
  it("takes Scheduler's input and refuses everySeconds without times", () => {
    expect(timerInvokerInputSchema.safeParse({ sourceId: SOURCE, scheduledAt: "2026-11-20T10:00:00Z" }).success).toBe(
      true,
    );
    expect(timerInvokerInputSchema.safeParse({ sourceId: SOURCE, everySeconds: 15 }).success).toBe(false);
    expect(timerInvokerInputSchema.safeParse({ sourceId: "sc_x" }).success).toBe(false);
  });

  it("takes a workflow's timer trigger as the union's other target, and nothing in between", () => {
    const workflow = { workflowId: WORKFLOW, timerId: TIMER };
    const parsed = timerInvokerInputSchema.parse({
      ...workflow,
      scheduledAt: "2026-11-20T10:00:00Z",
      everySeconds: 30,
      times: 2,
    });
    expect(timerTargetOf(parsed)).toEqual(workflow);
    expect(scheduledTimes(parsed, 0)).toEqual([AT, AT + 30_000]);
    expect(timerTargetOf(timerInvokerInputSchema.parse({ sourceId: SOURCE }))).toEqual({ sourceId: SOURCE });
    for (const bad of [
      { workflowId: WORKFLOW },
      { timerId: TIMER },
      { workflowId: "dc_x", timerId: TIMER },
      { workflowId: WORKFLOW, timerId: "hi_x" },
      { ...workflow, sourceId: SOURCE },
      { ...workflow, everySeconds: 15 },
      { ...workflow, times: 61, everySeconds: 1 },
      {},
    ]) {
      expect(timerInvokerInputSchema.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });
});

describe("scheduledTimes", () => {
  it("is the scheduled time for a plain timer", () => {
    expect(scheduledTimes({ sourceId: SOURCE, scheduledAt: "2026-11-20T10:00:00Z" }, AT + 900)).toEqual([AT]);
  });

  it("spreads sub-minute runs over the minute from the scheduled time", () => {
    expect(
      scheduledTimes({ sourceId: SOURCE, scheduledAt: "2026-11-20T10:00:00Z", everySeconds: 15, times: 4 }, AT),
    ).toEqual([AT, AT + 15_000, AT + 30_000, AT + 45_000]);
  });

  it("uses now when the scheduled time is missing or was not filled in", () => {
    expect(scheduledTimes({ sourceId: SOURCE, scheduledAt: "<aws.scheduler.scheduled-time>" }, AT)).toEqual([AT]);
    expect(scheduledTimes({ sourceId: SOURCE }, AT)).toEqual([AT]);
  });
});

describe("fireScheduledRuns", () => {
  it("fires each run at its time without waiting for the one before", async () => {
    const time = fakeTime(AT + 400);
    const fired: { target: TimerTarget; at: number; now: number }[] = [];
    const pending: (() => void)[] = [];
    const done = fireScheduledRuns(
      { sourceId: SOURCE, scheduledAt: "2026-11-20T10:00:00Z", everySeconds: 20, times: 3 },
      (target, at) => {
        fired.push({ target, at, now: time.clock.nowMs() });
        return new Promise<void>((resolve) => pending.push(resolve));
      },
      time,
    );
    // Runs hang until released: all three still start, on time.
    const deadline = Date.now() + 5000;
    while (fired.length < 3 && Date.now() < deadline) await new Promise((resolve) => setImmediate(resolve));
    expect(fired).toEqual([
      { target: { sourceId: SOURCE }, at: AT, now: AT + 400 },
      { target: { sourceId: SOURCE }, at: AT + 20_000, now: AT + 20_000 },
      { target: { sourceId: SOURCE }, at: AT + 40_000, now: AT + 40_000 },
    ]);
    expect(time.sleeps).toEqual([19_600, 20_000]);
    for (const release of pending) release();
    await expect(done).resolves.toBeUndefined();
  });

  it("fires a workflow's timer trigger at each of its times, naming its ti_ id when runs fail", async () => {
    const time = fakeTime(AT);
    const fired: { target: TimerTarget; at: number }[] = [];
    const result = fireScheduledRuns(
      { workflowId: WORKFLOW, timerId: TIMER, scheduledAt: "2026-11-20T10:00:00Z", everySeconds: 30, times: 2 },
      async (target, at) => {
        fired.push({ target, at });
        throw new Error("queue down");
      },
      time,
    );
    await expect(result).rejects.toThrow(`2 of 2 timer runs of ${TIMER} failed`);
    expect(fired).toEqual([
      { target: { workflowId: WORKFLOW, timerId: TIMER }, at: AT },
      { target: { workflowId: WORKFLOW, timerId: TIMER }, at: AT + 30_000 },
    ]);
  });

  it("lets every run happen and then reports the ones that failed", async () => {
    const time = fakeTime(AT);
    let calls = 0;
    const result = fireScheduledRuns(
      { sourceId: SOURCE, scheduledAt: "2026-11-20T10:00:00Z", everySeconds: 30, times: 2 },
      async () => {
        calls += 1;
        if (calls === 1) throw new Error("store down");
      },
      time,
    );
    await expect(result).rejects.toThrow(`1 of 2 timer runs of ${SOURCE} failed`);
    expect(calls).toBe(2);
  });
});
