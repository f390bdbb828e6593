/**
 * Checking JSON that came from another process (a sandbox's result, a queued message) without
 * copying it. zod's `z.json()` and `z.record()` rebuild objects by assignment, and assigning a
 * `__proto__` key sets the copy's prototype instead: the key, which JSON.parse made an own key of
 * the data, is silently dropped (issue 12). These schemas check the same and hand the value on as
 * it is.
 */
import { z } from "zod";
import type { Json } from "./component-model.ts";

const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
};

/**
 * True when `value` is JSON data: null, a boolean, a finite number, a string, or arrays and plain
 * objects of those. Walked with a stack of its own, so no nesting depth overflows it.
 */
export function isJsonValue(value: unknown): value is Json {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item === "string" || typeof item === "boolean") continue;
    if (typeof item === "number") {
      if (!Number.isFinite(item)) return false;
    } else if (Array.isArray(item)) {
      pending.push(...item);
    } else if (isPlainObject(item)) {
      for (const key of Object.keys(item)) pending.push(item[key]);
    } else {
      return false;
    }
  }
  return true;
}

/** A JSON value, checked and passed on unchanged (`z.json()` without the copy). */
export const jsonValueSchema = z.custom<Json>(isJsonValue, { error: "must be a JSON value" });

/** A JSON object keyed by string, checked and passed on unchanged (`z.record(z.string(), z.json())` without the copy). */
export const jsonObjectSchema = z.custom<Record<string, Json>>((value) => isPlainObject(value) && isJsonValue(value), {
  error: "must be a JSON object",
});
