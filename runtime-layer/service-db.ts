/**
 * `$.service.db` over the snapshot an invocation carries (real-behaviour.md §1.4): `get` and `set`
 * are synchronous, as registry components call them without `await`, and every `set` is recorded
 * so trusted code can persist it after the run (DESIGN.md decision 2).
 */
import type { Json } from "./protocol.ts";
import { DB_MAX_BYTES } from "./result-limits.ts";

export interface ServiceDb {
  /** A deep copy of the stored value; `undefined` when the key was never set. */
  get(key: string): Json | undefined;
  /**
   * Stores a JSON-serialisable value (`undefined` stores `null`).
   * @throws TypeError when the value holds a function, symbol or bigint, or a cycle;
   * RangeError when the store would outgrow {@link DB_MAX_BYTES}.
   */
  set(key: string, value: unknown): void;
}

/** Bytes `"key":value,` adds to the store's JSON text. */
const entryBytes = (key: string, text: string) => Buffer.byteLength(JSON.stringify(key)) + Buffer.byteLength(text) + 2;

/** A db over a copy of `snapshot`; each `set` also lands in `writes` (key to its last value). */
export function createServiceDb(snapshot: Record<string, Json>, writes: Record<string, Json>): ServiceDb {
  // Values are kept as JSON text: `get` then returns a fresh copy, and sizes are known.
  const texts = new Map<string, string>();
  let bytes = 2;
  for (const [key, value] of Object.entries(snapshot)) {
    const text = JSON.stringify(value) ?? "null";
    texts.set(key, text);
    bytes += entryBytes(key, text);
  }
  return {
    get(key) {
      const text = texts.get(String(key));
      return text === undefined ? undefined : (JSON.parse(text) as Json);
    },
    set(key, value) {
      const name = String(key);
      const text = serialise(name, value);
      const previous = texts.get(name);
      const next = bytes - (previous === undefined ? 0 : entryBytes(name, previous)) + entryBytes(name, text);
      // A store already over the limit (a lower limit than when it was written) may still shrink.
      if (next > DB_MAX_BYTES && next > bytes) {
        throw new RangeError(
          `$.service.db: setting "${name}" would grow the store to ${next} bytes, over the limit of ${DB_MAX_BYTES}`,
        );
      }
      texts.set(name, text);
      bytes = next;
      // defineProperty: a key named `__proto__` is data, which an assignment would drop.
      Object.defineProperty(writes, name, {
        value: JSON.parse(text) as Json,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    },
  };
}

function serialise(key: string, value: unknown): string {
  try {
    const text = JSON.stringify(value, (_name, item: unknown) => {
      // JSON.stringify would silently drop these (or throw for bigint): the code would lose data.
      if (typeof item === "function" || typeof item === "symbol" || typeof item === "bigint") {
        throw new TypeError(`it contains a ${typeof item}`);
      }
      return item;
    });
    return text ?? "null";
  } catch (error) {
    throw new TypeError(
      `$.service.db: the value for key "${key}" is not JSON-serialisable: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
