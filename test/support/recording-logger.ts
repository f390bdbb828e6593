import type { Logger } from "#core/ports/logger";

/**
 * A logger that keeps every error line as `{ message, ...fields }` in `errors` (for tests that
 * assert what was logged) and drops debug, info and warn lines. Its children record into the same list.
 */
export function recordingLogger(errors: Record<string, unknown>[] = []): Logger {
  const logger: Logger = {
    debug() {},
    info() {},
    warn() {},
    error: (message, fields) => errors.push({ message, ...fields }),
    child: () => logger,
  };
  return logger;
}
