/**
 * The limits on what one run returns, checked by trusted code on every result before anything is
 * applied (DESIGN.md decision 2; docs/components.md "Limits"). The runtime keeps to the same limits
 * as the code runs, but the code running beside it can send a result of its own, so nothing here
 * trusts that it did. Pure: every platform applies results through these functions.
 *
 * Over a limit, what the run returned is cut to what fits and each cut is described as an error
 * record, which the caller stores on the source's `$errors` channel. Nothing partial breaks an
 * invariant: an emit is kept whole or not at all, a run's `$.service.db` writes are saved all
 * together or not at all, a response is answered as normalised or refused.
 */

import { normalizeResponse } from "#runtime/http-response";
import type {
  EmitLimits,
  EmitRecord,
  ErrorRecord,
  HttpResponseSpec,
  InvocationResult,
  Json,
  LogRecord,
} from "#runtime/protocol";
import { DB_MAX_BYTES, EMIT_LIMIT_ERROR, LOG_MAX_BYTES, LOG_RECORD_OVERHEAD } from "#runtime/result-limits";
import { CHANNEL_NAME_MAX_LENGTH } from "./channels.ts";
import { forbiddenCharacterIn } from "./names.ts";

/** JSON size of one emitted event; larger emits are not stored. */
export const MAX_EMIT_BYTES = 256 * 1024;
/** JSON size of one emit's options (`id`, `name`, `summary`, `ts`), under what DynamoDB stores with an event. */
export const MAX_EMIT_META_BYTES = 16 * 1024;
/**
 * Characters of an emit's `id`: dedupe keeps up to 100 of them in the source's state, which must
 * stay well under DynamoDB's 400 KB item beside a full `$.service.db`.
 */
export const MAX_EMIT_ID_LENGTH = 1024;
/** Characters of a run's error message and of its stack; longer ones are cut. */
export const MAX_ERROR_TEXT = 16 * 1024;

export const SERVICE_DB_LIMIT_ERROR = "ServiceDbLimitError";
export const RESPONSE_ERROR = "ResponseError";

/** A kept emit as the limits check measured it. */
export interface MeasuredEmit {
  /** Its event as JSON text, made once to measure it: what the store writes (`NewEvent.eventJson`). */
  eventJson: string;
  /** UTF-8 bytes of its event and meta JSON, as stored: what the stored totals count. */
  storedBytes: number;
}

/** A result cut to the limits, and what was cut. */
export interface LimitedResult {
  /** The emits kept, in call order. */
  emits: EmitRecord[];
  /** How each kept emit was measured, as it is stored. */
  measured: Map<EmitRecord, MeasuredEmit>;
  logs: LogRecord[];
  /** The run's own error, its texts cut to {@link MAX_ERROR_TEXT}. */
  error?: ErrorRecord;
  /** The response, normalised again; absent when the run gave none or it was refused. */
  response?: HttpResponseSpec;
  /** One record per kind of cut (emits, response), for `$errors`. */
  problems: ErrorRecord[];
}

/** Checks a result against the limits; `now` stamps the records of what was cut. */
export function limitResult(result: InvocationResult, limits: EmitLimits, now: number): LimitedResult {
  const problems: ErrorRecord[] = [];
  const measured = new Map<EmitRecord, MeasuredEmit>();
  const limited: LimitedResult = {
    emits: limitEmits(result.emits, limits, now, measured, (problem) => problems.push(problem)),
    measured,
    logs: limitLogs(result.logs, now),
    problems,
  };
  if (result.error) limited.error = limitError(result.error);
  if (result.response) {
    const checked = checkResponse(result.response);
    if ("response" in checked) limited.response = checked.response;
    else limited.problems.push({ name: RESPONSE_ERROR, message: checked.refused, ts: now });
  }
  return limited;
}

/** A response normalised again, or why it is refused (then the caller gets a 502 instead). */
export function checkResponse(response: unknown): { response: HttpResponseSpec } | { refused: string } {
  try {
    return { response: normalizeResponse(response) };
  } catch (error) {
    return { refused: `the response was refused: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/**
 * Why one more emit of `size` bytes, after `count` emits of `bytes` in all, goes past a run's
 * emit limits; undefined when it fits. A source's emits and a workflow's `$.send.emit`s share it.
 */
export function emitOverRun(limits: EmitLimits, count: number, bytes: number, size: number): string | undefined {
  if (count >= limits.maxEmits) return `the run emitted more than ${limits.maxEmits} events, the most one run may emit`;
  if (bytes + size > limits.maxEmitBytes) {
    return `the run emitted more than ${limits.maxEmitBytes} bytes of events, the most one run may emit`;
  }
  return undefined;
}

/**
 * The emits kept: each must be JSON of at most {@link MAX_EMIT_BYTES} with valid options (refused
 * alone otherwise); then, in call order, as many as the run's count and bytes allow. The first emit
 * past either ends what is kept, as the runtime ends the run there.
 */
function limitEmits(
  emits: EmitRecord[],
  limits: EmitLimits,
  now: number,
  measured: Map<EmitRecord, MeasuredEmit>,
  report: (problem: ErrorRecord) => void,
): EmitRecord[] {
  const kept: EmitRecord[] = [];
  const refused: string[] = [];
  let bytes = 0;
  let overRun: string | undefined;
  for (const emit of emits) {
    const text = JSON.stringify(emit.event ?? null) ?? "null";
    const size = Buffer.byteLength(text);
    const metaSize = jsonBytes(emit.meta as Json);
    const invalid =
      size > MAX_EMIT_BYTES ? `an event of ${size} bytes (at most ${MAX_EMIT_BYTES})` : invalidMeta(emit, metaSize);
    if (invalid !== undefined) {
      refused.push(invalid);
      continue;
    }
    overRun = emitOverRun(limits, kept.length, bytes, size);
    if (overRun !== undefined) break;
    bytes += size;
    kept.push(emit);
    measured.set(emit, { eventJson: text, storedBytes: size + metaSize });
  }
  const messages: string[] = [];
  if (overRun) messages.push(`${overRun}: the first ${kept.length} were stored, the rest were not`);
  if (refused.length > 0) {
    const shown = refused.slice(0, 3).join("; ");
    messages.push(`${refused.length} events were not stored: ${shown}${refused.length > 3 ? "; ..." : ""}`);
  }
  if (messages.length > 0) report({ name: EMIT_LIMIT_ERROR, message: messages.join(". "), ts: now });
  return kept;
}

/** Why an emit's options are refused, or undefined when they are fine. */
function invalidMeta({ meta }: EmitRecord, size: number): string | undefined {
  const name = meta.name;
  if (
    name !== undefined &&
    (name.length > CHANNEL_NAME_MAX_LENGTH || /\p{Cc}/u.test(name) || forbiddenCharacterIn(name) !== undefined)
  ) {
    return `a channel name must be at most ${CHANNEL_NAME_MAX_LENGTH} characters without control or bidirectional control characters`;
  }
  // `$errors`, `$logs`, `$in`, `$sse`: Sluice's own channels, which code must not write into.
  if (name?.startsWith("$"))
    return `the channel ${JSON.stringify(name.slice(0, 40))} (names starting with $ are Sluice's)`;
  if (meta.id !== undefined && String(meta.id).length > MAX_EMIT_ID_LENGTH) {
    return `an id of ${String(meta.id).length} characters (at most ${MAX_EMIT_ID_LENGTH})`;
  }
  if (size > MAX_EMIT_META_BYTES) return `emit options of ${size} bytes (at most ${MAX_EMIT_META_BYTES})`;
  return undefined;
}

/** The logs within {@link LOG_MAX_BYTES}, counted as the runtime counts them, then one warning line. */
function limitLogs(logs: LogRecord[], now: number): LogRecord[] {
  let bytes = 0;
  for (let index = 0; index < logs.length; index++) {
    bytes += Buffer.byteLength((logs[index] as LogRecord).message) + LOG_RECORD_OVERHEAD;
    if (bytes > LOG_MAX_BYTES) {
      const note = `further logs were dropped: one invocation may log at most ${LOG_MAX_BYTES} bytes`;
      return [...logs.slice(0, index), { ts: now, level: "warn", message: note }];
    }
  }
  return logs;
}

function limitError(error: ErrorRecord): ErrorRecord {
  const cut = (text: string) =>
    text.length > MAX_ERROR_TEXT
      ? `${text.slice(0, MAX_ERROR_TEXT)}... (${text.length - MAX_ERROR_TEXT} more characters)`
      : text;
  const limited: ErrorRecord = { ...error, name: cut(error.name).slice(0, 200), message: cut(error.message) };
  if (error.stack !== undefined) limited.stack = cut(error.stack);
  return limited;
}

/**
 * The source's `$.service.db` after a run's writes, or the db as it was when they would grow it past
 * {@link DB_MAX_BYTES} (a store already over a lower limit may still shrink, as in the runtime). The
 * run's writes are saved together or not at all: a subset could break what the code keeps in
 * several keys.
 */
export function mergeServiceDb(
  db: Record<string, Json>,
  writes: Record<string, Json>,
  now: number,
): { db: Record<string, Json>; refused?: ErrorRecord } {
  const merged = { ...db, ...writes };
  const after = jsonBytes(merged);
  if (after <= DB_MAX_BYTES) return { db: merged };
  const before = jsonBytes(db);
  if (after <= before) return { db: merged };
  const keys = Object.keys(writes).length;
  return {
    db,
    refused: {
      name: SERVICE_DB_LIMIT_ERROR,
      message: `$.service.db: the run's writes (${keys} keys) were not saved: they would grow the store to ${after} bytes, over the limit of ${DB_MAX_BYTES}`,
      ts: now,
    },
  };
}

/**
 * The compute time a run is counted: what the host reported, if it is a finite number of at least
 * 0 and at most what the run could have taken (its time limit twice, as a displaced run runs again
 * once, or what the trusted side saw it take); otherwise what the trusted side saw; rounded up to
 * whole milliseconds. A host that
 * relays a child's figure can be told less than the truth; that is the host's to measure.
 */
export function trustedDuration(reportedMs: unknown, elapsedMs: number, timeoutMs: number): number {
  const elapsed = Math.max(0, elapsedMs);
  const trusted =
    typeof reportedMs !== "number" || !Number.isFinite(reportedMs) || reportedMs < 0
      ? elapsed
      : Math.min(reportedMs, Math.max(elapsed, 2 * timeoutMs));
  // Whole milliseconds: the counters and `/users/me` report integers.
  return Math.ceil(trusted);
}

const jsonBytes = (value: Json) => Buffer.byteLength(JSON.stringify(value) ?? "null");
