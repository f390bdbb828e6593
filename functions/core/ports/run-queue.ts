import type { Json } from "#core/component-model";

/** A run of a source that does not need to finish before its trigger is answered. */
export interface RunJob {
  sourceId: string;
  trigger: "http" | "timer" | "event";
  /** The `run(event)` argument. */
  event: Json;
  /** Webhook deliveries that led to this run (`#core/hops`); absent for none. */
  hops?: number;
}

/**
 * Hands runs to be done after the caller is answered (an HTTP interface without custom response,
 * a source listening to another). Adapters: `SqliteRunQueue` (local mode: a row in SQLite, run in
 * this process in the background) and `LambdaRunQueue` (AWS: an asynchronous `Invoke` of the
 * source-runner function, which Lambda queues). Either way the job ends in `runSource(deps, job)`
 * of `#core/source-runs`, at least once: a job may run twice after a crash.
 */
export interface RunQueue {
  /** Resolves once the job is durable (it survives a crash of this process); rejects otherwise. */
  enqueue(job: RunJob): Promise<void>;
}
