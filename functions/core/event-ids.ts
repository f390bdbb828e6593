/**
 * Event ids `<epoch_ms>-<n>` (rest-api.md "Event summary"): strictly increasing per source in
 * (ms, n) numeric order, which is not string order (`9-0` < `10-0`).
 */
import { invalid } from "./errors.ts";

/** At most 15 digits of ms and 9 of n: what both stores can order exactly. */
export const EVENT_ID = /^(\d{1,15})-(\d{1,9})$/;

/** `[ms, n]` of an event id, or undefined when it is not one. */
export function parseEventId(id: string): [number, number] | undefined {
  const match = EVENT_ID.exec(id);
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2])];
}

/** `[ms, n]` of an event id, or a 400 naming `field`. */
export function requireEventId(id: string, field: string): [number, number] {
  const parsed = parseEventId(id);
  if (!parsed) throw invalid(field, "is not an event id (expected <epoch_ms>-<n>, as in event summaries)");
  return parsed;
}

/** Negative, zero or positive as `a` is older than, the same as, or newer than `b`. */
export function compareEventIds(a: string, b: string): number {
  const [aMs, aN] = parseEventId(a) ?? [0, 0];
  const [bMs, bN] = parseEventId(b) ?? [0, 0];
  return aMs - bMs || aN - bN;
}
