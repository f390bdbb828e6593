/**
 * The `Idempotency-Key` header of `POST /v1/sources` (docs/components.md "Retrying a deploy"), after
 * the IETF draft "The Idempotency-Key HTTP Header Field": a key the client chooses, remembered per
 * user for {@link IDEMPOTENCY_KEY_TTL_MS} with the hash of the request it came with (the
 * workflows' `requestHash`, decision 237: key order does not count), so a retried create answers
 * the source the first one made instead of deploying a second.
 */

import { DomainError, invalid } from "./errors.ts";

/** The header's name, as errors and docs spell it. */
export const IDEMPOTENCY_HEADER = "Idempotency-Key";

/** Longest key, in characters. */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

/** How long a key is remembered after the create that used it began: 24 hours. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 60 * 60 * 1000;

/** `value` when it is an acceptable key: 1 to 255 printable ASCII characters (space included). */
export function requireIdempotencyKey(value: string): string {
  if (value.length < 1 || value.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    throw invalid(IDEMPOTENCY_HEADER, `must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`);
  }
  // A header value is ASCII on the wire; anything else (controls, bytes above 0x7e) is refused
  // rather than compared in some decoding.
  if (!/^[\x20-\x7e]+$/.test(value)) {
    throw invalid(IDEMPOTENCY_HEADER, "must be printable ASCII characters only");
  }
  return value;
}

/** The 422 of a key sent again with another request. */
export const keyReusedWithOtherRequest = () =>
  new DomainError(
    "unprocessable",
    `${IDEMPOTENCY_HEADER}: this key was used with a different request; send a new key for a new request`,
    [{ field: IDEMPOTENCY_HEADER, message: "was used with a different request" }],
  );

/** The 409 of a key whose first request is still being served. */
export const keyStillInFlight = (resourceId: string) =>
  new DomainError(
    "conflict",
    `${IDEMPOTENCY_HEADER}: the first request with this key is still in progress (${resourceId}); retry when it has answered`,
    [{ field: IDEMPOTENCY_HEADER, message: "its first request is still in progress" }],
  );
