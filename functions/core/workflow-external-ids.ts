/**
 * A workflow's `external_id` (docs/design/workflows.md 1.4): a client-chosen name, unique in its
 * workspace, stored with the hash of the request that last wrote the workflow. The same request
 * sent again (a retried create, a CI job PUTting its definition on every run) is then known
 * without comparing definitions, and changes nothing.
 */

import { invalid } from "./errors.ts";
import { requireDisplayableName } from "./names.ts";
import { sha256Hex } from "./sha256.ts";

/** Longest `external_id`, in characters (design 1.4). */
export const EXTERNAL_ID_MAX_LENGTH = 200;

/** `value` when it is an acceptable `external_id`: 1 to 200 printable characters. */
export function requireExternalId(value: string): string {
  if (value.length < 1 || value.length > EXTERNAL_ID_MAX_LENGTH) {
    throw invalid("external_id", `must be 1 to ${EXTERNAL_ID_MAX_LENGTH} characters`);
  }
  // Printable: no control character (tabs and line breaks included: it is a name, shown on one line).
  if (/\p{Cc}/u.test(value)) throw invalid("external_id", "must not contain control characters");
  return requireDisplayableName("external_id", value);
}

/**
 * JSON with every object's keys in code-point order and `undefined` members left out, so two
 * bodies that differ only in key order or in absent fields give the same text.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const members = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`);
    return `{${members.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** SHA-256 (hex) of the canonical JSON of a request body without its `external_id` (design 1.4). */
export function requestHash(body: object): string {
  const { external_id: _ignored, ...definition } = body as Record<string, unknown>;
  return sha256Hex(canonicalJson(definition));
}
