import type { Json } from "#core/component-model";

/** A run of a source that does not need to finish before its trigger is answered. */
export interface RunJob {
  sourceId: string;
  trigger: "http" | "timer" | "event";
  /** The `run(event)` argument. */
  event: Json;
}

/**
 * Hands runs to be done after the caller is answered (an HTTP interface without custom response).
 * Adapters: `InProcessRunQueue` (local mode: runs in this process, in the background) and
 * `LambdaRunQueue` (AWS: an asynchronous `Invoke` of the source-runner function). Either way the
 * job ends in `runSource(deps, job)` of `#core/source-runs`.
 */
export interface RunQueue {
  enqueue(job: RunJob): Promise<void>;
}
