import type { TimerSpec } from "#core/component-model";

/**
 * Fires the timers of sources. Adapters: `LocalTimers` (in-process; croner for cron) and
 * `SchedulerTimers` (one EventBridge Scheduler schedule per source).
 *
 * A fired timer calls `fireTimer(deps, sourceId, scheduledAtMs)` in `#core/source-runs`.
 */
export interface Timers {
  /** Creates or replaces the schedule of a source. */
  schedule(sourceId: string, spec: TimerSpec): Promise<void>;
  /** Removes the schedule of a source; cancelling a missing one succeeds. */
  cancel(sourceId: string): Promise<void>;
}
