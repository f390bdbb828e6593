/** Structured logging: one JSON object per line, so CloudWatch and local terminals read the same. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

type Level = "info" | "warn" | "error";

export function jsonLogger(
  base: Record<string, unknown> = {},
  write: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Logger {
  const emit = (level: Level, message: string, fields?: Record<string, unknown>) =>
    write(JSON.stringify({ level, time: new Date().toISOString(), message, ...base, ...fields }));
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => jsonLogger({ ...base, ...fields }, write),
  };
}

export const silentLogger: Logger = {
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};
