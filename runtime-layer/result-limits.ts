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
