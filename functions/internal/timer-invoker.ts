/**
 * The function EventBridge Scheduler invokes for a timer (`SchedulerTimers`): a source's
 * (`{sourceId}`) or a workflow's timer trigger (`{workflowId, timerId}`), with `scheduledAt`; for
 * an interval under a minute also `{everySeconds, times}`, and the timer then fires `times` times,
 * `everySeconds` apart, from the scheduled time on, all within this one invocation (Scheduler's
 * finest rate is a minute). A source runs here; a workflow's tick is queued as a run whose id is
 * made from the timer and the tick's time, so a tick Scheduler delivers twice runs once.
 *
 * Runs do not wait for each other: each starts at its own time, as separate timer ticks would, and
 * the core merges overlapping runs' state. Lambda does not retry this function (the stack sets
 * zero retries): a failed tick is logged, and the next tick comes anyway.
 */
import { setTimeout as sleepFor } from "node:timers/promises";
import * as z from "zod";
import type { TimerInvokerInput } from "#config/shared-names";
import { type Clock, systemClock } from "#core/ports/clock";
import { type TimerTarget, timerTargetId, timerTargetOf } from "#core/ports/timers";
import { fireTimerTarget } from "#core/workflow-timers";
import { awsDepsLoader, internalHandler, SOURCE_RUNNING_PARTS } from "./internal-handler.ts";

const repeats = {
  /** ISO 8601, filled in by Scheduler. */
  scheduledAt: z.string().optional(),
  everySeconds: z.number().int().min(1).max(59).optional(),
  times: z.number().int().min(1).max(60).optional(),
};

export const timerInvokerInputSchema: z.ZodType<TimerInvokerInput> = z
  .union([
    z.object({ sourceId: z.string().startsWith("dc_"), ...repeats }).strict(),
    z.object({ workflowId: z.string().startsWith("p_"), timerId: z.string().startsWith("ti_"), ...repeats }).strict(),
  ])
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
 * Fires the timer at each of its scheduled times (waiting for each), then waits for all runs.
 * @throws AggregateError of the runs that failed, after every run has ended.
 */
export async function fireScheduledRuns(
  input: TimerInvokerInput,
  fire: (target: TimerTarget, scheduledAtMs: number) => Promise<unknown>,
  options: FireOptions = {},
): Promise<void> {
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? sleepFor;
  const runs: Promise<unknown>[] = [];
  for (const at of scheduledTimes(input, clock.nowMs())) {
    const wait = at - clock.nowMs();
    if (wait > 0) await sleep(wait);
    runs.push(fire(timerTargetOf(input), at));
  }
  const failures = (await Promise.allSettled(runs)).filter((run) => run.status === "rejected");
  if (failures.length > 0) {
    throw new AggregateError(
      failures.map((failure) => (failure as PromiseRejectedResult).reason),
      `${failures.length} of ${runs.length} timer runs of ${timerTargetId(timerTargetOf(input))} failed`,
    );
  }
}

export const handler = internalHandler(
  "timer input",
  timerInvokerInputSchema,
  (deps, input) => fireScheduledRuns(input, (target, at) => fireTimerTarget(deps, target, at), { clock: deps.clock }),
  // It runs sources and workflows (and queues their runs), as the stack grants (lib/constructs/source-compute.ts).
  awsDepsLoader({ ...SOURCE_RUNNING_PARTS, runs: () => import("#adapters/aws/parts/runs") }),
);
