/**
 * Local mode's run queue driver and timer firing, as `functions/internal/source-runner.ts` and
 * `functions/internal/timer-invoker.ts` are on AWS: what the run queue (`SqliteRunQueue`) and the
 * timers (`LocalTimers`) call when a queued run is due or a timer fires. They take the deps late,
 * since the queue and the timers are built before the deps that hold them.
 */
import type { Deps } from "#core/ports/deps";
import type { RunJob } from "#core/ports/run-queue";
import type { TimerTarget } from "#core/ports/timers";
import { runQueuedJob } from "#core/run-jobs";
import { fireTimerTarget } from "#core/workflow-timers";

/** Runs one queued job (a source's or a workflow's) with the deps `depsOf` answers once they exist. */
export const queuedRunner =
  (depsOf: () => Deps) =>
  (job: RunJob): Promise<unknown> =>
    runQueuedJob(depsOf(), job);

/** Fires a timer (a source's, or a workflow's timer trigger) for the slot at `scheduledAtMs`. */
export const timerFiring =
  (depsOf: () => Deps) =>
  async (target: TimerTarget, scheduledAtMs: number): Promise<void> => {
    await fireTimerTarget(depsOf(), target, scheduledAtMs);
  };
