/**
 * What counts as JSON data when it comes from another process. Shared by the protocol's parsers
 * (`protocol-parsers.ts`) and trusted code's own schemas (`functions/core/json-value.ts`), so both
 * sides of the boundary agree on it. Pure: no I/O.
 */
import type { Json } from "./protocol.ts";

/** A plain object: what JSON.parse makes of `{...}` (or an object without a prototype). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * Deepest nesting of arrays and objects in JSON data from another process. Trusted code stores and
 * sends it on with `JSON.stringify`, which recurses: 200 KB of brackets nest 100,000 deep and
 * overflow the server's stack. The runtime's own serialiser cannot make data much deeper than a
 * few thousand levels; 1,000 is far beyond any real value.
 */
export const MAX_JSON_VALUE_DEPTH = 1000;

/**
 * True when `value` is JSON data: null, a boolean, a finite number, a string, or arrays and plain
 * objects of those, nested at most `maxDepth` deep. Walked with a stack of its own and without
 * spreading arrays into calls, so no array length overflows it (a 16 MiB result may hold millions
 * of items).
 */
export function isJsonValue(value: unknown, maxDepth = MAX_JSON_VALUE_DEPTH): value is Json {
  // Items and their depth, side by side (a pair per item would be an allocation each).
  const pending: unknown[] = [value];
  const depths: number[] = [0];
  while (pending.length > 0) {
    const item = pending.pop();
    const depth = depths.pop() as number;
    if (item === null || typeof item === "string" || typeof item === "boolean") continue;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) return false;
    } else if (Array.isArray(item)) {
      if (depth >= maxDepth) return false;
      for (const element of item) {
        pending.push(element);
        depths.push(depth + 1);
      }
    } else if (isPlainObject(item)) {
      if (depth >= maxDepth) return false;
      for (const key of Object.keys(item)) {
        pending.push(item[key]);
        depths.push(depth + 1);
      }
    } else {
      return false;
    }
  }
  return true;
}

/**
 * The UTF-8 bytes of `JSON.stringify(value)`, counted without building that text, and given up
 * once they pass `limit` (the count so far, over `limit`, is returned). Code can hand over a value
 * whose text would not fit in its heap: one 1 MiB string referenced 100 times is 100 MB of JSON.
 * `value` must be JSON data (what `toJson` returns: no `undefined` inside).
 */
export function jsonBytesWithin(value: Json, limit: number): number {
  let bytes = 0;
  const pending: Json[] = [value];
  while (pending.length > 0 && bytes <= limit) {
    const item = pending.pop() as Json;
    if (item === null) bytes += 4;
    else if (typeof item === "boolean") bytes += item ? 4 : 5;
    else if (typeof item === "number") bytes += JSON.stringify(item).length;
    else if (typeof item === "string") bytes += stringBytes(item, limit - bytes);
    else if (Array.isArray(item)) {
      bytes += 2 + Math.max(item.length - 1, 0);
      for (const element of item) pending.push(element);
    } else {
      const keys = Object.keys(item);
      bytes += 2 + Math.max(keys.length - 1, 0);
      for (const key of keys) {
        bytes += stringBytes(key, limit - bytes) + 1;
        pending.push(item[key] as Json);
      }
    }
  }
  return bytes;
}

/** A string's bytes as JSON text; past `room`, only the lower bound (one byte per UTF-16 unit, two quotes). */
function stringBytes(text: string, room: number): number {
  return text.length + 2 > room ? text.length + 2 : Buffer.byteLength(JSON.stringify(text));
}
