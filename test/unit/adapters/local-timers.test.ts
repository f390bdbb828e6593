import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LocalTimers } from "#adapters/local/local-timers";
import { isDomainError } from "#core/errors";
import { systemClock } from "#core/ports/clock";
import { jsonLogger } from "#core/ports/logger";
import { type TimerTarget, timerTargetId } from "#core/ports/timers";

/** A line the timers logged: its level, message and fields. */
type LogLine = { level: "info" | "warn" | "error"; message: string } & Record<string, unknown>;

const T0 = Date.parse("2024-03-30T08:00:00Z");
const SECOND = 1000;
const DAY = 86_400 * SECOND;

interface Harness {
  timers: LocalTimers;
  /** Each firing: the timer's `timerTargetId` and the slot. */
  fires: { id: string; scheduledAtMs: number }[];
  lines: LogLine[];
}

function harness(onFire?: (target: TimerTarget, scheduledAtMs: number) => Promise<void> | void): Harness {
  const fires: Harness["fires"] = [];
  const lines: LogLine[] = [];
  const timers = new LocalTimers({
    clock: systemClock,
    log: jsonLogger({}, (line) => lines.push(JSON.parse(line))),
    onFire: (target, scheduledAtMs) => {
      fires.push({ id: timerTargetId(target), scheduledAtMs });
      return onFire?.(target, scheduledAtMs);
    },
  });
  return { timers, fires, lines };
}

describe("LocalTimers (fake time)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("fires an interval timer one interval after scheduling, then on its cadence, with the slot's time", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await vi.advanceTimersByTimeAsync(59 * SECOND);
    expect(fires).toEqual([]);
    await vi.advanceTimersByTimeAsync(121 * SECOND);
    expect(fires).toEqual([
      { id: "dc_a", scheduledAtMs: T0 + 60 * SECOND },
      { id: "dc_a", scheduledAtMs: T0 + 120 * SECOND },
      { id: "dc_a", scheduledAtMs: T0 + 180 * SECOND },
    ]);
    await timers.stop();
  });

  it("keeps timers of different sources apart", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await timers.schedule({ sourceId: "dc_b" }, { intervalSeconds: 90 });
    await vi.advanceTimersByTimeAsync(180 * SECOND);
    expect(fires.filter((fire) => fire.id === "dc_a")).toHaveLength(3);
    expect(fires.filter((fire) => fire.id === "dc_b")).toHaveLength(2);
    await timers.stop();
  });

  it("fires a workflow's timer trigger with its target, apart from a source's, and cancels it by its ti_ id", async () => {
    const targets: TimerTarget[] = [];
    const { timers, fires } = harness((target) => void targets.push(target));
    const workflowTimer = { workflowId: "p_a", timerId: "ti_a" };
    await timers.schedule(workflowTimer, { intervalSeconds: 30 });
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await timers.schedule({ workflowId: "p_a", timerId: "ti_b" }, { intervalSeconds: 60 });
    expect([...timers.scheduled().keys()]).toEqual(["ti_a", "dc_a", "ti_b"]);
    await vi.advanceTimersByTimeAsync(60 * SECOND);
    expect(fires.filter((fire) => fire.id === "ti_a").map((fire) => fire.scheduledAtMs)).toEqual([
      T0 + 30 * SECOND,
      T0 + 60 * SECOND,
    ]);
    expect(targets).toContainEqual(workflowTimer);
    expect(targets).toContainEqual({ sourceId: "dc_a" });
    await timers.cancel({ workflowId: "p_a", timerId: "ti_a" });
    await vi.advanceTimersByTimeAsync(60 * SECOND);
    expect(fires.filter((fire) => fire.id === "ti_a")).toHaveLength(2);
    expect(fires.filter((fire) => fire.id === "dc_a")).toHaveLength(2);
    expect(fires.filter((fire) => fire.id === "ti_b")).toHaveLength(2);
    await timers.stop();
  });

  it("stops firing once cancelled, and cancelling again or an unknown source succeeds", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await vi.advanceTimersByTimeAsync(60 * SECOND);
    expect(fires).toHaveLength(1);
    await timers.cancel({ sourceId: "dc_a" });
    await timers.cancel({ sourceId: "dc_a" });
    await timers.cancel({ sourceId: "dc_unknown" });
    await vi.advanceTimersByTimeAsync(600 * SECOND);
    expect(fires).toHaveLength(1);
    expect(timers.scheduled().size).toBe(0);
  });

  it("replaces the timer of a source, anchored at the new schedule", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await vi.advanceTimersByTimeAsync(30 * SECOND);
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 300 });
    expect(timers.scheduled()).toEqual(new Map([["dc_a", T0 + 330 * SECOND]]));
    await vi.advanceTimersByTimeAsync(299 * SECOND);
    expect(fires).toEqual([]);
    await vi.advanceTimersByTimeAsync(1 * SECOND);
    expect(fires).toEqual([{ id: "dc_a", scheduledAtMs: T0 + 330 * SECOND }]);
    await timers.stop();
  });

  it("skips a slot while the previous run of the source is in progress, with a log line", async () => {
    let finish: () => void = () => {};
    const { timers, fires, lines } = harness(
      () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    );
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 1 });
    await vi.advanceTimersByTimeAsync(5 * SECOND);
    expect(fires).toHaveLength(1);
    const skipped = lines.filter((line) => line.level === "warn" && /skipped/.test(line.message));
    expect(skipped).toHaveLength(4);
    expect(skipped[0]).toMatchObject({
      sourceId: "dc_a",
      scheduledAt: new Date(T0 + 2 * SECOND).toISOString(),
    });

    finish();
    await vi.advanceTimersByTimeAsync(1 * SECOND);
    expect(fires).toHaveLength(2);
    expect(fires[1]?.scheduledAtMs).toBe(T0 + 6 * SECOND);
    finish();
    await timers.stop();
  });

  it("logs errors of a run and keeps firing", async () => {
    let calls = 0;
    const { timers, fires, lines } = harness(() => {
      calls += 1;
      if (calls === 1) throw new Error("sync boom");
      return Promise.reject(new Error("async boom"));
    });
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 10 });
    await vi.advanceTimersByTimeAsync(30 * SECOND);
    expect(fires).toHaveLength(3);
    const errors = lines.filter((line) => line.level === "error");
    expect(errors).toHaveLength(3);
    expect(String(errors[0]?.error)).toMatch(/sync boom/);
    expect(String(errors[1]?.error)).toMatch(/async boom/);
    expect(errors[0]?.sourceId).toBe("dc_a");
    await timers.stop();
  });

  it("does not catch up on missed runs after a restart", async () => {
    const first = harness();
    await first.timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await vi.advanceTimersByTimeAsync(150 * SECOND);
    expect(first.fires).toHaveLength(2);
    await first.timers.stop();

    await vi.advanceTimersByTimeAsync(600 * SECOND); // the process is down
    expect(first.fires).toHaveLength(2);

    const second = harness();
    await second.timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 60 });
    await vi.advanceTimersByTimeAsync(59 * SECOND);
    expect(second.fires).toEqual([]);
    await vi.advanceTimersByTimeAsync(1 * SECOND);
    expect(second.fires).toEqual([{ id: "dc_a", scheduledAtMs: T0 + 810 * SECOND }]);
    await second.timers.stop();
  });

  it("waits longer than setTimeout's maximum without firing early", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 100 * 86_400 });
    await vi.advanceTimersByTimeAsync(99 * DAY);
    expect(fires).toEqual([]);
    await vi.advanceTimersByTimeAsync(1 * DAY);
    expect(fires).toEqual([{ id: "dc_a", scheduledAtMs: T0 + 100 * DAY }]);
    await timers.stop();
  });

  it("fires a cron timer in its time zone across a DST change", async () => {
    vi.setSystemTime(T0 - 3600 * SECOND); // 08:00 in Berlin, an hour before the first run
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { cron: "0 9 * * *", timezone: "Europe/Berlin" });
    await vi.advanceTimersByTimeAsync(2 * DAY - SECOND);
    expect(fires.map((fire) => new Date(fire.scheduledAtMs).toISOString())).toEqual([
      "2024-03-30T08:00:00.000Z",
      "2024-03-31T07:00:00.000Z",
    ]);
    await timers.stop();
  });

  it("stops every timer, waits for runs in progress and ignores later schedules", async () => {
    let finish: () => void = () => {};
    let finished = false;
    const { timers, fires, lines } = harness(
      () =>
        new Promise<void>((resolve) => {
          finish = () => {
            finished = true;
            resolve();
          };
        }),
    );
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 1 });
    await timers.schedule({ sourceId: "dc_b" }, { intervalSeconds: 5 });
    await vi.advanceTimersByTimeAsync(1 * SECOND);
    expect(fires).toHaveLength(1);

    let stopped = false;
    const stopping = timers.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(finished).toBe(true);

    await timers.schedule({ sourceId: "dc_c" }, { intervalSeconds: 1 });
    await vi.advanceTimersByTimeAsync(10 * SECOND);
    expect(fires).toHaveLength(1);
    expect(timers.scheduled().size).toBe(0);
    expect(lines.some((line) => line.level === "warn" && /stopped/.test(line.message))).toBe(true);
  });

  it("refuses an invalid timer", async () => {
    const { timers } = harness();
    const error = await timers.schedule({ sourceId: "dc_a" }, {}).catch((caught: unknown) => caught);
    expect(isDomainError(error) && error.code === "validation").toBe(true);
    expect(timers.scheduled().size).toBe(0);
  });
});

describe("LocalTimers (real time)", () => {
  it("fires with real timers", async () => {
    const { timers, fires } = harness();
    await timers.schedule({ sourceId: "dc_a" }, { intervalSeconds: 1 });
    const deadline = Date.now() + 10_000;
    while (fires.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await timers.stop();
    expect(fires.length).toBeGreaterThanOrEqual(2);
    expect((fires[1]?.scheduledAtMs ?? 0) - (fires[0]?.scheduledAtMs ?? 0)).toBe(1000);
  });
});
