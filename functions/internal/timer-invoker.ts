/**
 * The function EventBridge Scheduler invokes for a source's timer (`SchedulerTimers`). The input
 * is `{sourceId, scheduledAt}`; for an interval under a minute also `{everySeconds, times}`, and
 * the source is then run `times` times, `everySeconds` apart, from the scheduled time on, all
 * within this one invocation (Scheduler's finest rate is a minute).
 *
 * Runs do not wait for each other: each starts at its own time, as separate timer ticks would, and
 * the core merges overlapping runs' state. Lambda does not retry this function (the stack sets
 * zero retries): a failed tick is logged, and the next tick comes anyway.
 */
import { setTimeout as sleepFor } from "node:timers/promises";
import { z } from "zod";
import type { TimerInvokerInput } from "#config/shared-names";
import { type Clock, systemClock } from "#core/ports/clock";
import { fireTimer } from "#core/source-runs";
import { internalHandler } from "./internal-handler.ts";

export const timerInvokerInputSchema: z.ZodType<TimerInvokerInput> = z
  .object({
    sourceId: z.string().startsWith("dc_"),
    /** ISO 8601, filled in by Scheduler. */
    scheduledAt: z.string().optional(),
    everySeconds: z.number().int().min(1).max(59).optional(),
    times: z.number().int().min(1).max(60).optional(),
  })
  .refine((input) => (input.everySeconds === undefined) === (input.times === undefined), {
    message: "everySeconds and times come together",
  });

/** The scheduled times of the runs one invocation makes, in epoch milliseconds. */
export function scheduledTimes(input: TimerInvokerInput, nowMs: number): number[] {
  const parsed = input.scheduledAt === undefined ? Number.NaN : Date.parse(input.scheduledAt);
  // Unparseable (an unfilled placeholder, a manual test invoke): the tick is now.
  const first = Number.isFinite(parsed) ? parsed : nowMs;
  const times = input.times ?? 1;
  const every = (input.everySeconds ?? 0) * 1000;
  return Array.from({ length: times }, (_, index) => first + index * every);
}

export interface FireOptions {
  clock?: Clock;
  /** Waits `ms` milliseconds. @default node:timers/promises setTimeout */
  sleep?: (ms: number) => Promise<unknown>;
}

/**
 * Fires the source at each of its scheduled times (waiting for each), then waits for all runs.
 * @throws AggregateError of the runs that failed, after every run has ended.
 */
export async function fireScheduledRuns(
  input: TimerInvokerInput,
  fire: (sourceId: string, scheduledAtMs: number) => Promise<unknown>,
  options: FireOptions = {},
): Promise<void> {
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? sleepFor;
  const runs: Promise<unknown>[] = [];
  for (const at of scheduledTimes(input, clock.nowMs())) {
    const wait = at - clock.nowMs();
    if (wait > 0) await sleep(wait);
    runs.push(fire(input.sourceId, at));
  }
  const failures = (await Promise.allSettled(runs)).filter((run) => run.status === "rejected");
  if (failures.length > 0) {
    throw new AggregateError(
      failures.map((failure) => (failure as PromiseRejectedResult).reason),
      `${failures.length} of ${runs.length} timer runs of ${input.sourceId} failed`,
    );
  }
}

export const handler = internalHandler("timer input", timerInvokerInputSchema, (deps, input) =>
  fireScheduledRuns(input, (sourceId, at) => fireTimer(deps, sourceId, at), { clock: deps.clock }),
);
