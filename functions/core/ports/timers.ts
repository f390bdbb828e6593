import type { TimerSpec } from "#core/component-model";

/** What a timer runs: a source with a timer prop, or one timer trigger (`ti_`) of a workflow. */
export type TimerTarget = { sourceId: string } | { workflowId: string; timerId: string };

/**
 * The one id a timer is known by (`dc_` or `ti_`): a source has one timer, and a timer trigger's
 * id is unique among all workflows, so neither needs its owner beside it to be named.
 */
export function timerTargetId(target: TimerTarget): string {
  return "sourceId" in target ? target.sourceId : target.timerId;
}

/** The target's own fields, whatever else `value` carries (a Scheduler input, a stored trigger). */
export function timerTargetOf(value: TimerTarget): TimerTarget {
  return "sourceId" in value ? { sourceId: value.sourceId } : { workflowId: value.workflowId, timerId: value.timerId };
}

/**
 * Fires the timers of sources and of workflows' timer triggers. Adapters: `LocalTimers`
 * (in-process; croner for cron) and `SchedulerTimers` (one EventBridge Scheduler schedule per
 * timer, named by {@link timerTargetId}).
 *
 * A fired timer calls `fireTimerTarget(deps, target, scheduledAtMs)` in `#core/workflow-timers`:
 * `fireTimer` of `#core/source-runs` for a source, `fireWorkflowTimer` for a workflow.
 */
export interface Timers {
  /** Creates or replaces the schedule of a timer. */
  schedule(target: TimerTarget, spec: TimerSpec): Promise<void>;
  /** Removes the schedule of a timer; cancelling a missing one succeeds. */
  cancel(target: TimerTarget): Promise<void>;
}
