import type { Writable } from "node:stream";
import { createLogger, type LogFormat, type Logger, type LogLevel } from "#core/ports/logger";

/**
 * Bytes a log stream may hold unwritten (its reader is slow or stopped) before lines are dropped.
 * Node buffers a pipe's writes without bound, so a stalled log reader under load would otherwise
 * grow the server's memory by a line per request.
 */
export const MAX_UNWRITTEN_LOG_BYTES = 4 * 1024 * 1024;

export interface LineWriterOptions {
  /** Unwritten bytes past which lines are dropped. @default MAX_UNWRITTEN_LOG_BYTES */
  maxUnwrittenBytes?: number;
  /**
   * Gathers the lines of one event-loop turn and writes them at once, before the next turn's I/O
   * (and when the process exits): one write call instead of one per line. For a long-running
   * process only; a Lambda function may be frozen before its turn ends.
   */
  perTurn?: boolean;
}

/** Flushes of the per-turn writers, run once more when the process exits (stdio writes are synchronous then). */
const flushesAtExit = new Set<() => void>();

function flushAtExit(flush: () => void): void {
  if (flushesAtExit.size === 0) {
    process.once("exit", () => {
      for (const each of flushesAtExit) each();
    });
  }
  flushesAtExit.add(flush);
}

/**
 * Writes each line to `stream`, or drops it while more than `maxUnwrittenBytes` wait unwritten;
 * the next line written after a drop is preceded by `droppedNotice(count)`. A stream that fails
 * (its reader went away: EPIPE) loses lines and never stops the server.
 */
export function boundedLineWriter(
  stream: Writable,
  droppedNotice: (count: number) => string,
  options: LineWriterOptions = {},
): (line: string) => void {
  const { maxUnwrittenBytes = MAX_UNWRITTEN_LOG_BYTES, perTurn = false } = options;
  let dropped = 0;
  stream.on("error", () => {});
  const writeLines = (text: string, lines: number) => {
    if (stream.writableLength > maxUnwrittenBytes || stream.destroyed) {
      dropped += lines;
      return;
    }
    if (dropped > 0) {
      stream.write(`${droppedNotice(dropped)}\n`);
      dropped = 0;
    }
    stream.write(text);
  };
  if (!perTurn) return (line) => writeLines(`${line}\n`, 1);

  let pending = "";
  let pendingLines = 0;
  let droppedInTurn = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pendingLines === 0) return;
    const text = pending;
    const lines = pendingLines;
    pending = "";
    pendingLines = 0;
    writeLines(text, lines);
    // Dropped after what was kept: the notice comes before the next lines written.
    dropped += droppedInTurn;
    droppedInTurn = 0;
  };
  flushAtExit(flush);
  return (line) => {
    // One turn's lines are bounded as the stream's unwritten bytes are.
    if (pending.length > maxUnwrittenBytes) {
      droppedInTurn++;
      return;
    }
    pending += `${line}\n`;
    pendingLines++;
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}

export interface StreamLoggerOptions {
  level: LogLevel;
  /** Undefined: `text` on a terminal, else `json`. */
  format: LogFormat | undefined;
  base?: Record<string, unknown>;
  /** @default process.stderr */
  stream?: Writable & { isTTY?: boolean };
  /** Write the lines of one event-loop turn at once ({@link LineWriterOptions.perTurn}). @default false */
  perTurn?: boolean;
}

/** The configured format, or for none `text` when `stream` is a terminal and `json` otherwise. */
export function logFormatFor(format: LogFormat | undefined, stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return format ?? (stream.isTTY ? "text" : "json");
}

/** The logger of a process: lines on stderr (by default), in the configured level and format. */
export function streamLogger(options: StreamLoggerOptions): Logger {
  const stream = options.stream ?? process.stderr;
  const format = logFormatFor(options.format, stream);
  let notice = "";
  const notices = createLogger({ level: "warn", format, write: (line) => (notice = line), now: Date.now });
  const write = boundedLineWriter(
    stream,
    (count) => {
      notices.warn("log lines dropped: the log output was not read fast enough", { dropped: count });
      return notice;
    },
    { perTurn: options.perTurn },
  );
  return createLogger({ level: options.level, format, base: options.base, write, now: Date.now });
}
