/**
 * Local mode's run queue driver and timer firing, as `functions/internal/source-runner.ts` and
 * `functions/internal/timer-invoker.ts` are on AWS: what the run queue (`SqliteRunQueue`) and the
 * timers (`LocalTimers`) call when a queued run is due or a timer fires. They take the deps late,
 * since the queue and the timers are built before the deps that hold them.
 */
import type { Deps } from "#core/ports/deps";
import type { Logger } from "#core/ports/logger";
import type { RunJob } from "#core/ports/run-queue";
import type { TimerTarget } from "#core/ports/timers";
import { runQueuedJob } from "#core/run-jobs";
import { fireTimerTarget } from "#core/workflow-timers";

/**
 * The run queue's driver and the timers' firing, which share one count: the ticks of each
 * workflow timer queued or running in this process. A workflow's tick only queues its run, so
 * `LocalTimers`' own rule (a slot whose previous run is still going is skipped, decision 28) would
 * hold for the enqueue alone; with the count, a tick whose timer still has one queued or running
 * is skipped the same way, with the same warning, and a workflow slower than its interval never
 * piles up queued ticks. Jobs a previous process left are not counted (at worst one more tick is
 * queued), and a job run again after a failure is counted down once more (the count stops at 0).
 */
export function localDrivers(depsOf: () => Deps, log: Logger) {
  const pending = new Map<string, number>();
  const countDown = (timerId: string) => {
    const left = (pending.get(timerId) ?? 0) - 1;
    if (left > 0) pending.set(timerId, left);
    else pending.delete(timerId);
  };
  return {
    /** Runs one queued job (a source's or a workflow's) with the deps `depsOf` answers once they exist. */
    async run(job: RunJob): Promise<unknown> {
      try {
        return await runQueuedJob(depsOf(), job);
      } finally {
        if (job.kind === "workflow" && job.trigger === "timer") countDown(job.triggerId);
      }
    },
    /** Fires a timer (a source's, or a workflow's timer trigger) for the slot at `scheduledAtMs`. */
    async fire(target: TimerTarget, scheduledAtMs: number): Promise<void> {
      if (!("timerId" in target)) {
        await fireTimerTarget(depsOf(), target, scheduledAtMs);
        return;
      }
      if (pending.has(target.timerId)) {
        log.warn("timer run skipped: the previous run of this timer is still queued or in progress", {
          ...target,
          scheduledAt: new Date(scheduledAtMs).toISOString(),
        });
        return;
      }
      // Counted before the enqueue: the queue may run the job before the enqueue's promise settles.
      pending.set(target.timerId, 1);
      const job = await fireTimerTarget(depsOf(), target, scheduledAtMs).catch((error: unknown) => {
        countDown(target.timerId);
        throw error;
      });
      if (job === undefined) countDown(target.timerId);
    },
  };
}
