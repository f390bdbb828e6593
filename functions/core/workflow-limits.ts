/**
 * What trusted code checks in a workflow run's result before anything of it is applied
 * (docs/design/workflows.md 3.5, steps 1 and 2; DESIGN.md decision 2). The runtime keeps to the same
 * rules as the steps run, but code beside it can write a result of its own, so nothing here trusts
 * that it did.
 *
 * - {@link checkWorkflowResult}: the consistency with the invocation (the shape is the host's: it
 *   parses every answer with `parseWorkflowResult`, decisions 139-141). A result that fails it is
 *   dropped whole: the run fails with a `SandboxError`.
 * - {@link limitWorkflowResult}: the limits. What is over one is cut, each cut described as a
 *   `WorkflowLimitError`, and what is within them is applied.
 */

import type {
  ErrorRecord,
  HttpResponseSpec,
  Json,
  SendRecord,
  StepLogRecord,
  WorkflowInvocation,
  WorkflowLimits,
  WorkflowResult,
} from "#runtime/protocol";
import { clipText } from "./clip-text.ts";
import { forbiddenCharacterIn } from "./names.ts";
import { redactPaths } from "./redact-paths.ts";
import { checkResponse, emitOverRun, MAX_EMIT_BYTES, MAX_ERROR_TEXT, RESPONSE_ERROR } from "./run-limits.ts";
import { pauseInconsistency } from "./workflow-pauses.ts";
import type { DeliveredSend } from "./workflow-sends.ts";

/**
 * The error of a run whose result is forged or broken: `MALFORMED_RESULT_ERROR` of the protocol's
 * parsers, which the hosts use for a result of the wrong shape (core does not import the parsers).
 */
export const SANDBOX_ERROR = "SandboxError";

/** The name of the `$errors` event of a cut (a send, an emit, a log line over a limit). */
export const WORKFLOW_LIMIT_ERROR = "WorkflowLimitError";
/** Characters of an `$.send.sse` channel name. */
export const SSE_CHANNEL_MAX_LENGTH = 200;
/** Log lines a run record keeps, and their UTF-8 bytes together (the record stays under 64 KB). */
export const MAX_RUN_LOG_LINES = 100;
export const MAX_RUN_LOG_BYTES = 32 * 1024;
/** Characters of one kept log line. */
const RUN_LOG_LINE_MAX_CHARS = 4 * 1024;

/** The result, or the `SandboxError` the run fails with (nothing of the result applied). */
export type CheckedResult = { ok: true; result: WorkflowResult } | { ok: false; error: ErrorRecord };

/**
 * Checks a result (of the protocol's shape: the host parsed it) against its invocation (design 3.5
 * step 1): its invocation id; its steps a prefix of the invocation's, in order; every step but the
 * last a success (so none follows an error or an exit); a response only when the invocation could
 * respond.
 */
export function checkWorkflowResult(
  result: WorkflowResult,
  invocation: WorkflowInvocation,
  now: number,
): CheckedResult {
  const problem =
    result.invocationId === invocation.invocationId
      ? inconsistency(result, invocation)
      : "it answers another invocation";
  if (problem === undefined) return { ok: true, result };
  return {
    ok: false,
    error: {
      name: SANDBOX_ERROR,
      message: `the workflow's runtime sent an inconsistent result (${problem}); nothing of it was applied`,
      ts: now,
    },
  };
}

function inconsistency(result: WorkflowResult, invocation: WorkflowInvocation): string | undefined {
  if (result.steps.length > invocation.steps.length) {
    return `it names ${result.steps.length} steps, the run has ${invocation.steps.length}`;
  }
  for (const [index, outcome] of result.steps.entries()) {
    const expected = invocation.steps[index]?.id;
    if (outcome.id !== expected) return `steps[${index}] is not the run's step ${index} (${expected})`;
    if (index < result.steps.length - 1 && outcome.status !== "success") {
      return `steps[${index}] ${outcome.status === "error" ? "failed" : "exited"} and a later step ran`;
    }
  }
  if (result.response !== undefined && !invocation.respondable) {
    return "it carries a response, and this run could not respond";
  }
  if (result.pause !== undefined) {
    const last = result.steps[result.steps.length - 1];
    // Only a rerun step counts its runs: the first of a continuation that reruns it.
    const runs = invocation.rerun && invocation.steps[0]?.id === result.pause.stepId ? invocation.rerun.runs : 1;
    return pauseInconsistency(result.pause, last, runs, invocation.flow !== undefined);
  }
  return undefined;
}

/** A send kept for the delivery queue, with its index among the run's sends. */
export interface KeptSend {
  index: number;
  send: DeliveredSend;
}

/** A result cut to the limits. */
export interface LimitedWorkflowResult {
  /** `$.send.emit` events to store on channel `""`, in call order, with their stored bytes. */
  emits: { rawEvent: Json; bytes: number }[];
  /** `$.send.sse` events to store on `$sse`. */
  sse: { channel: string; payload: Json; bytes: number }[];
  /** `$.send.http` and `$.send.s3`, for the delivery queue. */
  delivered: KeptSend[];
  /** The run record's log lines: capped, the server's paths removed. */
  logs: StepLogRecord[];
  /** The response, normalised again; absent when none was given or it was refused. */
  response?: HttpResponseSpec;
  /** True when a response was given and refused (the caller answers 502). */
  responseRefused: boolean;
  /** One record per kind of cut, for `$errors`. */
  problems: ErrorRecord[];
}

/**
 * Cuts a consistent result to the limits (design 3.5 step 2). Sends, in call order: a payload over
 * {@link MAX_EMIT_BYTES} or an `sse` channel that is not a displayable name is refused alone; the
 * first send past `maxSends`, past `maxSendBytes`, or (an emit) past the emit limits ends what is
 * kept, as the runtime ends the run at that call.
 */
export function limitWorkflowResult(
  result: WorkflowResult,
  limits: WorkflowLimits,
  now: number,
): LimitedWorkflowResult {
  const limited: LimitedWorkflowResult = {
    emits: [],
    sse: [],
    delivered: [],
    logs: capRunLogs(result.logs, now, new Set(result.steps.map((step) => step.id))),
    responseRefused: false,
    problems: [],
  };
  const refused: string[] = [];
  let overRun: string | undefined;
  let kept = 0;
  let bytes = 0;
  let emitBytes = 0;
  for (const [index, send] of result.sends.entries()) {
    const payloadBytes = jsonBytes(payloadOf(send));
    if (payloadBytes > MAX_EMIT_BYTES) {
      refused.push(`a $.send.${send.type} payload of ${payloadBytes} bytes (at most ${MAX_EMIT_BYTES})`);
      continue;
    }
    if (send.type === "sse" && !displayableName(send.channel)) {
      refused.push(
        `an sse channel must be 1 to ${SSE_CHANNEL_MAX_LENGTH} characters without control or bidirectional control characters`,
      );
      continue;
    }
    const size = jsonBytes(send as unknown as Json);
    if (kept >= limits.maxSends) {
      overRun = `the run sent more than ${limits.maxSends} times, the most one run may send`;
      break;
    }
    if (bytes + size > limits.maxSendBytes) {
      overRun = `the run sent more than ${limits.maxSendBytes} bytes, the most one run may send`;
      break;
    }
    if (send.type === "emit") {
      overRun = emitOverRun(limits, limited.emits.length, emitBytes, payloadBytes);
      if (overRun !== undefined) break;
      emitBytes += payloadBytes;
    }
    kept++;
    bytes += size;
    if (send.type === "emit") limited.emits.push({ rawEvent: send.raw_event, bytes: payloadBytes });
    else if (send.type === "sse")
      limited.sse.push({ channel: send.channel, payload: send.payload, bytes: payloadBytes });
    else limited.delivered.push({ index, send });
  }
  const messages: string[] = [];
  if (overRun) messages.push(`${overRun}: the first ${kept} sends were kept, the rest were dropped`);
  if (refused.length > 0) {
    const shown = refused.slice(0, 3).join("; ");
    messages.push(`${refused.length} sends were dropped: ${shown}${refused.length > 3 ? "; ..." : ""}`);
  }
  if (messages.length > 0) limited.problems.push({ name: WORKFLOW_LIMIT_ERROR, message: messages.join(". "), ts: now });
  if (result.response) {
    const checked = checkResponse(result.response);
    if ("response" in checked) limited.response = checked.response;
    else {
      limited.responseRefused = true;
      limited.problems.push({ name: RESPONSE_ERROR, message: checked.refused, ts: now });
    }
  }
  return limited;
}

/** An error record with its texts cut to {@link MAX_ERROR_TEXT} and the server's paths removed. */
export function trustedError(error: ErrorRecord): ErrorRecord {
  const trusted: ErrorRecord = {
    name: clipText(error.name, 200),
    message: redactPaths(clipText(error.message, MAX_ERROR_TEXT)),
    ts: error.ts,
  };
  if (error.stack !== undefined) trusted.stack = redactPaths(clipText(error.stack, MAX_ERROR_TEXT));
  return trusted;
}

/**
 * The log lines a run record keeps: at most {@link MAX_RUN_LOG_LINES} lines and
 * {@link MAX_RUN_LOG_BYTES} bytes, each line cut, the server's paths removed; then one line saying
 * how many were dropped.
 */
export function capRunLogs(logs: StepLogRecord[], now: number, ranSteps: ReadonlySet<string>): StepLogRecord[] {
  const kept: StepLogRecord[] = [];
  let bytes = 0;
  // A line names a step that ran, or none: the child's word on it is not taken for any other id.
  const stepOf = (log: StepLogRecord) => (ranSteps.has(log.step) ? log.step : "");
  for (const log of logs) {
    const message = redactPaths(clipText(log.message, RUN_LOG_LINE_MAX_CHARS));
    const step = stepOf(log);
    const size = Buffer.byteLength(message) + step.length;
    if (kept.length >= MAX_RUN_LOG_LINES - 1 || bytes + size > MAX_RUN_LOG_BYTES) break;
    bytes += size;
    kept.push({ ts: log.ts, level: log.level, message, step });
  }
  const dropped = logs.length - kept.length;
  if (dropped > 0) {
    const last = logs[logs.length - 1];
    const step = last ? stepOf(last) : "";
    kept.push({ ts: now, level: "warn", message: `${dropped} more log lines of this run were dropped`, step });
  }
  return kept;
}

function payloadOf(send: SendRecord): Json {
  switch (send.type) {
    case "emit":
      return send.raw_event;
    case "http":
      return send.data ?? null;
    default:
      return send.payload;
  }
}

const displayableName = (name: string) =>
  name.length > 0 &&
  name.length <= SSE_CHANNEL_MAX_LENGTH &&
  !/\p{Cc}/u.test(name) &&
  forbiddenCharacterIn(name) === undefined;

const jsonBytes = (value: Json) => Buffer.byteLength(JSON.stringify(value) ?? "null");
