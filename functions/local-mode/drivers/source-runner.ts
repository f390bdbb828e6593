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
import { fireTimerTarget, timerRunId } from "#core/workflow-timers";

/**
 * The run queue's driver and the timers' firing, which share what each workflow timer has queued
 * or running in this process: the run ids of its ticks. A workflow's tick only queues its run, so
 * `LocalTimers`' own rule (a slot whose previous run is still going is skipped, decision 28) would
 * hold for the enqueue alone; with the ids, a tick whose timer still has one queued or running
 * is skipped the same way, with the same warning, and a workflow slower than its interval never
 * piles up queued ticks. A job a previous process left is not among them: when it ends it frees
 * nothing of this process's (a count here was taken down by it, and the timer then ran two ticks
 * at a time for the life of the process); at worst one tick runs beside it. A job run again after
 * a failure frees its tick's id once.
 */
export function localDrivers(depsOf: () => Deps, log: Logger) {
  const pending = new Map<string, Set<string>>();
  const release = (timerId: string, runId: string) => {
    const ids = pending.get(timerId);
    if (!ids?.delete(runId) || ids.size > 0) return;
    pending.delete(timerId);
  };
  return {
    /** Runs one queued job (a source's or a workflow's) with the deps `depsOf` answers once they exist. */
    async run(job: RunJob): Promise<unknown> {
      try {
        return await runQueuedJob(depsOf(), job);
      } finally {
        if (job.kind === "workflow" && job.trigger === "timer") release(job.triggerId, job.runId);
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
      // Noted before the enqueue: the queue may run the job before the enqueue's promise settles.
      const runId = timerRunId(target.timerId, scheduledAtMs);
      pending.set(target.timerId, new Set([runId]));
      const job = await fireTimerTarget(depsOf(), target, scheduledAtMs).catch((error: unknown) => {
        release(target.timerId, runId);
        throw error;
      });
      if (job === undefined) release(target.timerId, runId);
    },
  };
}
