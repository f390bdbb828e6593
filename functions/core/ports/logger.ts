/**
 * Structured logging: a record is a message and flat fields. It is written as one line, either a
 * JSON object (for log shippers and CloudWatch) or `time LEVEL message key=value ...` (for a
 * person at a terminal). Lines below the logger's level cost one no-op call.
 */
import { clipText } from "#core/clip-text";
import { isoTime } from "#core/time";

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/** From the most to the least talkative; `silent` writes nothing. */
export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ["text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

type Severity = Exclude<LogLevel, "silent">;

/**
 * Longest string value of a line, past which it is cut: a message can quote untrusted input (a
 * component's error, a path), and one line must stay one readable line.
 */
export const MAX_LOG_VALUE_CHARS = 2000;

export interface LoggerOptions {
  /** Lines below this level are dropped. @default "info" */
  readonly level?: LogLevel;
  /** @default "json" */
  readonly format?: LogFormat;
  /** Fields of every line. @default {} */
  readonly base?: Record<string, unknown>;
  /** Takes one line, without its newline. */
  readonly write: (line: string) => void;
  /** Epoch milliseconds of a line. */
  readonly now: () => number;
}

function clipped(value: unknown): unknown {
  return typeof value === "string" && value.length > MAX_LOG_VALUE_CHARS ? clipText(value, MAX_LOG_VALUE_CHARS) : value;
}

/** A replacer for what `JSON.stringify` refuses: a bigint becomes its digits, a cycle `"[cycle]"`. */
function tolerant() {
  const seen = new WeakSet<object>();
  return (_key: string, value: unknown) => {
    if (typeof value === "bigint") return value.toString();
    if (typeof value === "object" && value !== null) {
      if (seen.has(value)) return "[cycle]";
      seen.add(value);
    }
    return value;
  };
}

/** JSON of a value that never throws (see {@link tolerant}); the common case pays for no replacer. */
function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    try {
      return JSON.stringify(value, tolerant()) ?? String(value);
    } catch {
      return JSON.stringify(String(value));
    }
  }
}

const NO_FIELDS: Record<string, unknown> = {};

/**
 * The JSON line: `level`, `time` and `message` first and never overwritten by a field, then
 * `base`'s fields and `fields` (which win over `base`'s). Two objects rather than one merged by
 * spreading: a spread copy is an object V8 serialises about five times slower.
 */
export function formatJsonLine(
  level: Severity,
  timeMs: number,
  message: string,
  fields: Record<string, unknown>,
  base: Record<string, unknown> = NO_FIELDS,
): string {
  const record: Record<string, unknown> = { level, time: isoTime(timeMs), message: clipped(message) };
  for (const key in base) if (!(key in fields)) addField(record, key, base[key]);
  for (const key in fields) addField(record, key, fields[key]);
  return safeJson(record);
}

function addField(record: Record<string, unknown>, key: string, value: unknown): void {
  if (value === undefined || key === "level" || key === "time" || key === "message") return;
  record[key] = clipped(value);
}

/** A bare word in a text line; anything else (spaces, quotes, `=`, control characters, empty) is quoted. */
const BARE = /^[\w.:/@%+,{}[\]-]+$/;

/** Characters JSON leaves as they are that a terminal may still act on (DEL, C1 controls) or break a line at. */
const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;

/** A JSON string (or value) with every control character escaped, for a line a terminal shows. */
function quoted(value: unknown): string {
  return safeJson(value).replace(UNESCAPED_BY_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function textValue(value: unknown): string {
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "string" && BARE.test(value)) return value;
  return quoted(value);
}

/** A message written as it is: printable characters only (no control character, no line break). */
const PLAIN_MESSAGE = /^[^\p{Cc}\u2028\u2029]*$/u;

const LEVEL_LABEL: Record<Severity, string> = { debug: "DEBUG", info: "INFO ", warn: "WARN ", error: "ERROR" };

/**
 * The text line: `2026-11-26T05:30:01.234Z INFO  message key=value ...`. Values that are not bare
 * words are written as JSON strings, so a value can never start a line of its own or pose as
 * another field (a newline in a path or a message is `\n`, not a break).
 */
export function formatTextLine(
  level: Severity,
  timeMs: number,
  message: string,
  fields: Record<string, unknown>,
  base: Record<string, unknown> = NO_FIELDS,
): string {
  const text = clipText(message, MAX_LOG_VALUE_CHARS);
  let line = `${isoTime(timeMs)} ${LEVEL_LABEL[level]} ${PLAIN_MESSAGE.test(text) ? text : quoted(text)}`;
  for (const key in base)
    if (!(key in fields) && base[key] !== undefined) line += ` ${key}=${textValue(clipped(base[key]))}`;
  for (const key in fields) if (fields[key] !== undefined) line += ` ${key}=${textValue(clipped(fields[key]))}`;
  return line;
}

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 };
const noop = () => {};

/** A logger writing lines of `level` and above in `format`. A line that cannot be written is lost, never thrown. */
export function createLogger(options: LoggerOptions): Logger {
  const { level = "info", format = "json", base = {}, write, now } = options;
  const formatLine = format === "text" ? formatTextLine : formatJsonLine;
  const at = (severity: Severity) =>
    RANK[severity] < RANK[level]
      ? noop
      : (message: string, fields?: Record<string, unknown>) => {
          try {
            write(formatLine(severity, now(), message, fields ?? NO_FIELDS, base));
          } catch {}
        };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (fields) => createLogger({ ...options, base: { ...base, ...fields } }),
  };
}

/** JSON lines of every level (tests collect them with `write`; the default writes to stderr). */
export function jsonLogger(
  base: Record<string, unknown> = {},
  write: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Logger {
  return createLogger({ level: "debug", format: "json", base, write, now: Date.now });
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};
