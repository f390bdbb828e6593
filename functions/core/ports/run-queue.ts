import type { Json } from "#core/component-model";

/**
 * A run of a source that does not need to finish before its trigger is answered. `kind` is absent
 * in rows written before workflows existed (their queue rows still parse as source jobs).
 */
export interface SourceRunJob {
  kind?: "source";
  sourceId: string;
  trigger: "http" | "timer" | "event";
  /** The `run(event)` argument. */
  event: Json;
  /** Webhook deliveries that led to this run (`#core/hops`); absent for none. */
  hops?: number;
}

/**
 * A run of a workflow (docs/design/workflows.md 3.7). Its run id is made before it is queued: random
 * for an HTTP request, deterministic for a timer tick or an event delivery, so a job done twice
 * finds its run `done` (`WorkflowRunStore.beginRun`) and runs once.
 */
export interface WorkflowRunJob {
  kind: "workflow";
  workflowId: string;
  /** `run_`. */
  runId: string;
  trigger: "http" | "timer" | "event";
  /** What started it: the HTTP trigger (`hi_`), the timer (`ti_`) or the emitter of the event. */
  triggerId: string;
  /** `steps.trigger.event`; `null` in a continuation's job, whose event is its pause's. */
  event: Json;
  hops?: number;
  /** The continuation of a paused run (`#core/workflow-pauses`): the pause it goes on from. */
  resume?: { pauseId: string };
}

export type RunJob = SourceRunJob | WorkflowRunJob;

/** What a job runs (`dc_` or `p_`): the unit of a queue's fairness between emitters. */
export function jobTarget(job: RunJob): string {
  return job.kind === "workflow" ? job.workflowId : job.sourceId;
}

/**
 * Thrown by a run whose job must wait: another runner holds it until `retryAtMs` (a workflow run
 * begun by a process that may still be at work). The local queue holds the job until then; on AWS
 * the failure makes Lambda try it again later.
 */
export class RunBusyError extends Error {
  override readonly name = "RunBusyError";
  constructor(
    readonly retryAtMs: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Hands runs to be done after the caller is answered (an HTTP interface without custom response,
 * a source listening to another, a workflow's HTTP trigger). Adapters: `SqliteRunQueue` (local mode:
 * a row in SQLite, run in this process in the background) and `LambdaRunQueue` (AWS: an
 * asynchronous `Invoke` of the source-runner function, which Lambda queues). Either way the job
 * ends in `runQueuedJob(deps, job)` of `#core/run-jobs`, at least once: a job may run twice after a
 * crash.
 */
export interface RunQueue {
  /** Resolves once the job is durable (it survives a crash of this process); rejects otherwise. */
  enqueue(job: RunJob): Promise<void>;
}
