/**
 * Local mode's stores fail with SQLite's and the file system's errors when the data dir cannot take
 * a write: the disk is full, the file system or the file is read-only, an I/O error, the file busy
 * past the busy timeout. Those failures are the data dir's, not the request's: they become the
 * domain error `unavailable` (503, "try again later") at the ports' boundary, so no caller mistakes
 * them for a bug (500), and the run queue knows to try again rather than give up (docs/durability.md).
 */
import { DomainError, isDomainError } from "#core/errors";
import type { Logger } from "#core/ports/logger";

/** SQLite's primary result codes (extended codes start with them) and errno codes of a data dir that cannot take a write. */
const CAUSES: readonly [prefix: string, what: string][] = [
  ["SQLITE_FULL", "the server's disk is full"],
  ["ENOSPC", "the server's disk is full"],
  ["EDQUOT", "the server's disk quota is used up"],
  ["SQLITE_READONLY", "the server's data is read-only"],
  ["EROFS", "the server's data is read-only"],
  ["SQLITE_IOERR", "the server could not write its data (an I/O error)"],
  ["EIO", "the server could not write its data (an I/O error)"],
  ["SQLITE_CANTOPEN", "the server cannot open its data"],
  ["SQLITE_BUSY", "the server's data file is busy"],
];

/** What made `error` a failure of the data dir, in words for a client; undefined for any other error. */
export function storageFailureOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return undefined;
  return CAUSES.find(([prefix]) => code === prefix || code.startsWith(`${prefix}_`))?.[1];
}

/** True for a data dir failure, as SQLite or the file system raised it or as the domain error it was turned into. */
export const isDataDirFailure = (error: unknown): boolean =>
  (isDomainError(error) && error.code === "unavailable") || storageFailureOf(error) !== undefined;

/** The least time between two log lines about failing writes (a full disk fails every request). */
const LOG_EVERY_MS = 10_000;

/**
 * Turns data dir failures into `unavailable` domain errors (`storageFailureOf`), logs them with the
 * data dir and the original code (the client's message names neither), at most once per
 * {@link LOG_EVERY_MS} with a count of those not logged.
 */
export function storageErrorTranslator(dataDir: string, log: Logger) {
  let lastLogged = Number.NEGATIVE_INFINITY;
  let unlogged = 0;
  return (error: unknown, operation: string): unknown => {
    const what = storageFailureOf(error);
    if (what === undefined) return error;
    const now = Date.now();
    if (now - lastLogged >= LOG_EVERY_MS) {
      log.error("a write to the data dir failed", {
        data_dir: dataDir,
        operation,
        code: (error as { code: string }).code,
        error: String(error),
        ...(unlogged > 0 ? { failures_not_logged: unlogged } : {}),
      });
      lastLogged = now;
      unlogged = 0;
    } else {
      unlogged++;
    }
    const unavailable = new DomainError("unavailable", `${what}: the request was not stored; try again later`);
    unavailable.cause = error;
    return unavailable;
  };
}

/**
 * `port` with every method's failure (a throw, or a rejected promise) passed through `translate`.
 * The methods run on `port` itself; reads of its other members go through to it.
 */
export function translatingErrors<T extends object>(
  port: T,
  name: string,
  translate: (error: unknown, operation: string) => unknown,
): T {
  const wrapped = Object.create(port) as Record<string, unknown>;
  for (const member of methodNames(port)) {
    const method = (port as Record<string, unknown>)[member] as (...args: unknown[]) => unknown;
    const operation = `${name}.${member}`;
    // One per method, not a closure per call: every store call of every event goes through here.
    const rejected = (error: unknown) => {
      throw translate(error, operation);
    };
    wrapped[member] = (...args: unknown[]) => {
      let result: unknown;
      try {
        result = method.apply(port, args);
      } catch (error) {
        throw translate(error, operation);
      }
      return result instanceof Promise ? result.then(undefined, rejected) : result;
    };
  }
  return wrapped as T;
}

/** Names of the functions an object has, its own and its classes', but the constructor. */
function methodNames(object: object): Set<string> {
  const names = new Set<string>();
  for (let level: object | null = object; level && level !== Object.prototype; level = Object.getPrototypeOf(level)) {
    for (const name of Object.getOwnPropertyNames(level)) {
      if (name === "constructor") continue;
      const descriptor = Object.getOwnPropertyDescriptor(level, name);
      if (typeof descriptor?.value === "function") names.add(name);
    }
  }
  return names;
}
