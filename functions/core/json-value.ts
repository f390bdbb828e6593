/**
 * Checking JSON that came from another process (a sandbox's result, a queued message) without
 * copying it. zod's `z.json()` and `z.record()` rebuild objects by assignment, and assigning a
 * `__proto__` key sets the copy's prototype instead: the key, which JSON.parse made an own key of
 * the data, is silently dropped (issue 12). These schemas check the same and hand the value on as
 * it is.
 */
import * as z from "zod";
import { isJsonValue, isPlainObject } from "#runtime/json-value";
import type { Json } from "./component-model.ts";

export { isJsonValue };

/** A JSON value, checked and passed on unchanged (`z.json()` without the copy). */
export const jsonValueSchema = z.custom<Json>(isJsonValue, { error: "must be a JSON value" });

/** A JSON object keyed by string, checked and passed on unchanged (`z.record(z.string(), z.json())` without the copy). */
export const jsonObjectSchema = z.custom<Record<string, Json>>((value) => isPlainObject(value) && isJsonValue(value), {
  error: "must be a JSON object",
});
