/**
 * Hop counts of webhook deliveries, the pure part of loop detection (`delivery-loops.ts` says how
 * they stop a loop): the header, the bound, reading a request's count and marking a run's events.
 */
import type { NewEvent, StoredEvent } from "./component-model.ts";

/** The header a delivery carries its hop count in, and a request to an endpoint is read for. */
export const HOPS_HEADER = "x-sluice-hops";

/**
 * Most webhook deliveries one chain of events may pass through. A request carrying more is
 * refused. Low, because a run that emits k events per request turns a loop into k^n runs before
 * the bound; 5 still lets an event travel through five webhooks (Sluice to Sluice) on purpose.
 */
export const MAX_DELIVERY_HOPS = 5;

/**
 * The hop count a request carries: the largest integer among its `x-sluice-hops` values (repeated
 * headers included); 0 without one. A malformed value counts as none: only Sluice sends it, and a
 * peer that sends garbage only shortens or lengthens its own chain.
 */
export function hopsOfRequest(headers: Record<string, string | string[] | undefined>): number {
  let hops = 0;
  for (const name in headers) {
    if (!Object.hasOwn(headers, name) || name.toLowerCase() !== HOPS_HEADER) continue;
    const value = headers[name];
    for (const part of (Array.isArray(value) ? value : [value ?? ""]).join(",").split(",")) {
      const text = part.trim();
      if (/^\d{1,9}$/.test(text)) hops = Math.max(hops, Number(text));
    }
  }
  return hops;
}

/** The hop count of a stored event: 0 for one no delivery led to. */
export function hopsOf(event: Pick<StoredEvent, "meta">): number {
  const hops = event.meta.hops;
  return typeof hops === "number" && Number.isSafeInteger(hops) && hops > 0 ? hops : 0;
}

/** Marks the events of a run with its hop count (and removes any other, whoever set it). */
export function stampHops(events: NewEvent[], hops: number): void {
  for (const event of events) {
    if (hops > 0) event.meta = { ...event.meta, hops };
    else if (event.meta.hops !== undefined) {
      const { hops: _dropped, ...rest } = event.meta;
      event.meta = rest;
    }
  }
}

/** True when a request with this many hops must be refused. */
export const isDeliveryLoop = (hops: number) => hops > MAX_DELIVERY_HOPS;
