import type { Writable } from "node:stream";
import { createLogger, type LogFormat, type Logger, type LogLevel } from "#core/ports/logger";

/**
 * Bytes a log stream may hold unwritten (its reader is slow or stopped) before lines are dropped.
 * Node buffers a pipe's writes without bound, so a stalled log reader under load would otherwise
 * grow the server's memory by a line per request.
 */
export const MAX_UNWRITTEN_LOG_BYTES = 4 * 1024 * 1024;

/**
 * Writes each line to `stream`, or drops it while more than `maxUnwrittenBytes` wait unwritten;
 * the next line written after a drop is preceded by `droppedNotice(count)`. A stream that fails
 * (its reader went away: EPIPE) loses lines and never stops the server.
 */
export function boundedLineWriter(
  stream: Writable,
  droppedNotice: (count: number) => string,
  maxUnwrittenBytes = MAX_UNWRITTEN_LOG_BYTES,
): (line: string) => void {
  let dropped = 0;
  stream.on("error", () => {});
  return (line) => {
    if (stream.writableLength > maxUnwrittenBytes || stream.destroyed) {
      dropped++;
      return;
    }
    if (dropped > 0) {
      stream.write(`${droppedNotice(dropped)}\n`);
      dropped = 0;
    }
    stream.write(`${line}\n`);
  };
}

export interface StreamLoggerOptions {
  level: LogLevel;
  /** Undefined: `text` on a terminal, else `json`. */
  format: LogFormat | undefined;
  base?: Record<string, unknown>;
  /** @default process.stderr */
  stream?: Writable & { isTTY?: boolean };
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
  const write = boundedLineWriter(stream, (count) => {
    notices.warn("log lines dropped: the log output was not read fast enough", { dropped: count });
    return notice;
  });
  return createLogger({ level: options.level, format, base: options.base, write, now: Date.now });
}
