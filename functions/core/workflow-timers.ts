/**
 * Timer triggers of workflows (docs/design/workflows.md 3.6, decision 28): the event a tick
 * starts a run with, the firing of a tick (a queued run with a run id made from the timer and the
 * slot, so a tick delivered twice runs once), and the one entry both platforms' timers call.
 */
import type { Deps } from "#core/ports/deps";
import type { WorkflowRunJob } from "#core/ports/run-queue";
import type { TimerTarget } from "#core/ports/timers";
import type { Json, TimerSpec } from "./component-model.ts";
import { fireTimer, type RunDeps } from "./source-runs.ts";
import { DEFAULT_TIMER_TIMEZONE, timerRunEvent } from "./timer-schedule.ts";
import type { TimerTriggerRecord, WorkflowRecord } from "./workflow-model.ts";
import { runIdFor } from "./workflow-runs.ts";

const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/**
 * A moment as a clock in `timeZone` shows it: the `timezone_configured` and `timezone_utc` of a
 * workflow's timer event. The original documents these only as "an object with formatted
 * datetime data" for the schedule's zone and for UTC, so the fields are Sluice's (docs/workflows.md).
 */
export function zonedTime(atMs: number, timeZone: string) {
  const parts: Record<string, string> = {};
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
  for (const part of format.formatToParts(new Date(atMs))) parts[part.type] = part.value;
  const [year, month, day, hour, minute, second] = ["year", "month", "day", "hour", "minute", "second"].map((name) =>
    Number(parts[name]),
  ) as [number, number, number, number, number, number];
  const millisecond = ((atMs % 1000) + 1000) % 1000;
  const wallMs = Date.UTC(year, month - 1, day, hour, minute, second, millisecond);
  const offsetMinutes = Math.round((wallMs - atMs) / 60_000);
  const pad = (value: number, width = 2) => String(value).padStart(width, "0");
  const offset = `${offsetMinutes < 0 ? "-" : "+"}${pad(Math.floor(Math.abs(offsetMinutes) / 60))}:${pad(Math.abs(offsetMinutes) % 60)}`;
  const date = `${pad(year, 4)}-${pad(month)}-${pad(day)}`;
  const time = `${pad(hour)}:${pad(minute)}:${pad(second)}.${pad(millisecond, 3)}`;
  return {
    timezone: timeZone,
    iso8601: { timestamp: `${date}T${time}${offset}`, date, time, tz_offset: offset },
    year,
    month,
    day_of_month: day,
    // The weekday of the wall-clock date (UTC of a UTC date is that date).
    day_of_week: WEEKDAYS[new Date(Date.UTC(year, month - 1, day)).getUTCDay()] as string,
    hour,
    minute,
    second,
  };
}

/**
 * `steps.trigger.event` of a workflow's timer tick (real-behaviour.md §1.3): a source's timer event
 * (`timestamp`, `interval_seconds`, and `cron` with `timezone` for a cron timer) plus
 * `timezone_configured` (the timer's zone, UTC when it names none) and `timezone_utc`.
 */
export function workflowTimerEvent(spec: TimerSpec, scheduledAtMs: number): Json {
  return {
    ...timerRunEvent(spec, scheduledAtMs),
    timezone_configured: zonedTime(scheduledAtMs, spec.timezone ?? DEFAULT_TIMER_TIMEZONE),
    timezone_utc: zonedTime(scheduledAtMs, "UTC"),
  };
}

/** The run id of a timer's tick: the same for every delivery of the same tick (a Scheduler repeat). */
export const timerRunId = (timerId: string, scheduledAtMs: number) =>
  runIdFor(scheduledAtMs, "timer", timerId, String(scheduledAtMs));

/**
 * Fires a workflow's timer for the slot at `scheduledAtMs`: queues the run with a run id made from
 * the timer and the slot ({@link timerRunId}), so a tick fired twice runs once (`beginRun` finds the
 * second `done`). A deleted or inactive workflow, or a timer it no longer has, queues nothing; a
 * job queued before a deactivation is dropped by `runWorkflow`. The run is admitted against the
 * quotas when it runs, as any timer run.
 */
export async function fireWorkflowTimer(
  deps: Pick<Deps, "workflows" | "runs" | "log">,
  workflowId: string,
  timerId: string,
  scheduledAtMs: number,
): Promise<WorkflowRunJob | undefined> {
  const workflow = await deps.workflows.getWorkflow(workflowId);
  const timer = workflow?.active ? timerTriggersOf(workflow).find((trigger) => trigger.id === timerId) : undefined;
  if (!timer) {
    deps.log.debug("a timer tick of a deleted or inactive workflow, or of a removed timer, was dropped", {
      workflow_id: workflowId,
      timer_id: timerId,
    });
    return undefined;
  }
  const job: WorkflowRunJob = {
    kind: "workflow",
    workflowId,
    runId: timerRunId(timerId, scheduledAtMs),
    trigger: "timer",
    triggerId: timerId,
    event: workflowTimerEvent(timer.spec, scheduledAtMs),
  };
  await deps.runs.enqueue(job);
  return job;
}

/** What a fired timer does, on both platforms (`LocalTimers`' driver and the timer invoker). */
export function fireTimerTarget(
  deps: RunDeps & Pick<Deps, "workflows" | "runs">,
  target: TimerTarget,
  scheduledAtMs: number,
): Promise<unknown> {
  return "sourceId" in target
    ? fireTimer(deps, target.sourceId, scheduledAtMs)
    : fireWorkflowTimer(deps, target.workflowId, target.timerId, scheduledAtMs);
}

/** The timer triggers of a workflow. */
export function timerTriggersOf(workflow: Pick<WorkflowRecord, "triggers">): TimerTriggerRecord[] {
  return workflow.triggers.filter((trigger): trigger is TimerTriggerRecord => trigger.type === "timer");
}

/** The port's target of one of a workflow's timers. */
export const workflowTimerTarget = (workflowId: string, timerId: string): TimerTarget => ({ workflowId, timerId });
