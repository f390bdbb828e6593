/**
 * Limits on what one invocation returns. The runtime keeps to them as the code runs, and trusted
 * code checks every result against them again (`functions/core/run-limits.ts`), since the code
 * running beside the runtime can send a result of its own (docs/components.md "Limits").
 */

/** Log text one invocation may return; what comes after is dropped with one warning record. */
export const LOG_MAX_BYTES = 256 * 1024;
/** Largest a source's whole `$.service.db` may grow, as JSON text. */
export const DB_MAX_BYTES = 256 * 1024;
/** Counted per log record on top of its text, so that empty lines in a loop are bounded too. */
export const LOG_RECORD_OVERHEAD = 32;

/** Limits of one run's emits, set per deployment (`SLUICE_MAX_EMITS_PER_RUN`, `SLUICE_MAX_EMIT_BYTES_PER_RUN`). */
export interface EmitLimits {
  /** Events one run may emit; the emit past it ends the run. */
  maxEmits: number;
  /** UTF-8 bytes of the JSON of all of one run's emitted events together; the emit past it ends the run. */
  maxEmitBytes: number;
}

/** The name of the error a run ends with when it emits past its {@link EmitLimits}. */
export const EMIT_LIMIT_ERROR = "EmitLimitError";

/** Longest `$summary` kept in a step's outcome, in UTF-16 units. */
export const SUMMARY_MAX_CHARS = 200;
/** Longest exit reason kept in a step's outcome, in UTF-16 units. */
export const EXIT_REASON_MAX_CHARS = 1024;
/**
 * Longest message, and stack, of an error a workflow step returns, in UTF-16 units: a step may
 * throw an Error whose message is hundreds of megabytes, and the result must still cross.
 */
export const ERROR_TEXT_MAX_CHARS = 16 * 1024;

/** The names of the errors a workflow run ends with when a step goes past a limit of its `WorkflowLimits`. */
export const EXPORT_LIMIT_ERROR = "ExportLimitError";
export const SEND_LIMIT_ERROR = "SendLimitError";

/** Longest a run may pause (`$.flow.delay`, `$.flow.rerun`, `$.flow.suspend`'s timeout): 365 days. */
export const FLOW_PAUSE_MAX_MS = 365 * 24 * 60 * 60 * 1000;
/** How long `$.flow.suspend()` waits for its resume URL when given no timeout: 24 hours. */
export const FLOW_SUSPEND_DEFAULT_MS = 24 * 60 * 60 * 1000;
/** Reruns `$.flow.rerun` allows when given no `maxReruns` (the original's default). */
export const FLOW_RERUN_DEFAULT_MAX = 10;
/** Most reruns one step may ask for. */
export const FLOW_RERUN_MAX = 10_000;
/**
 * Largest a paused run's state may be, as JSON: the earlier steps' exports and a rerun's context
 * (trusted code counts the trigger event too). A DynamoDB item holds it with room to spare.
 */
export const PAUSE_STATE_MAX_BYTES = 256 * 1024;
/** The name of the error a step fails with when its run cannot pause. */
export const PAUSE_ERROR = "PauseError";
