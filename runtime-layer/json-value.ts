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
 * True when `value` is JSON data: null, a boolean, a finite number, a string, or arrays and plain
 * objects of those. Walked with a stack of its own and without spreading arrays into calls, so no
 * nesting depth and no array length overflows it (a 16 MiB result may hold millions of items).
 */
export function isJsonValue(value: unknown): value is Json {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item === "string" || typeof item === "boolean") continue;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) return false;
    } else if (Array.isArray(item)) {
      for (const element of item) pending.push(element);
    } else if (isPlainObject(item)) {
      for (const key of Object.keys(item)) pending.push(item[key]);
    } else {
      return false;
    }
  }
  return true;
}
