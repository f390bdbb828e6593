/**
 * Local mode's source runner and timer firing, as `functions/internal/source-runner.ts` and
 * `functions/internal/timer-invoker.ts` are on AWS: what the run queue (`SqliteRunQueue`) and the
 * timers (`LocalTimers`) call when a queued run is due or a timer fires. They take the deps late,
 * since the queue and the timers are built before the deps that hold them.
 */
import type { Deps } from "#core/ports/deps";
import type { RunJob } from "#core/ports/run-queue";
import { fireTimer, runSource } from "#core/source-runs";

/** Runs one queued job: `runSource` with the deps `depsOf` answers once they exist. */
export const queuedRunner =
  (depsOf: () => Deps) =>
  (job: RunJob): Promise<unknown> =>
    runSource(depsOf(), job);

/** Fires a source's timer for the slot at `scheduledAtMs`. */
export const timerFiring =
  (depsOf: () => Deps) =>
  async (sourceId: string, scheduledAtMs: number): Promise<void> => {
    await fireTimer(depsOf(), sourceId, scheduledAtMs);
  };
