import { timingSafeEqual } from "node:crypto";
import { sha256Hex } from "./sha256.ts";

/** Prefix of generated keys, so a leaked key is recognisable by secret scanners. */
export const API_KEY_PREFIX = "sluice_";
/** Shortest key accepted from an operator (`SLUICE_API_KEY`, `create-user --key`). */
export const API_KEY_MIN_LENGTH = 16;

export const hashApiKey = sha256Hex;

/** Constant-time comparison of two hex digests of equal length. */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, "hex");
  const right = Buffer.from(b, "hex");
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

/** Reads the key out of an `Authorization` header value; undefined when it is not a Bearer key. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
