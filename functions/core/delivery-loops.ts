/**
 * Delivery loops (issue 12, item 6). A webhook pointed at the HTTP endpoint of the source whose
 * events it receives (directly, through a second webhook and source, or through another host that
 * passes the request on) makes every event run the source again, which emits again, forever.
 *
 * Sluice counts hops: how many webhook deliveries led to an event.
 * - A delivery is sent with `x-sluice-hops: <hops of its event + 1>`.
 * - A request to an HTTP endpoint carrying the header brings its count into the run; every event
 *   the run stores (emits, `$logs`, `$errors`) carries it (`EventMeta.hops`, set by trusted code
 *   only), and so do the runs of sources subscribed to those events (no hop is added there: a
 *   source listening to a source is no delivery).
 * - A request carrying more than {@link MAX_DELIVERY_HOPS} is refused with 508 Loop Detected
 *   before the source runs, and the source gets one `$errors` event saying so (not one per
 *   refused request: at most one per {@link LOOP_ERROR_QUIET_MS} while it is the newest error).
 *   The webhook's delivery of a 508 is not retried (webhook-delivery.ts): it becomes a dead letter.
 *
 * A loop through a host that drops the header cannot be told from new traffic and is not
 * stopped; per-run and per-workspace limits bound it instead.
 */
import type { Json, SourceRecord, StoredEvent } from "./component-model.ts";
import { ERRORS_CHANNEL } from "./component-model.ts";
import { HOPS_HEADER, MAX_DELIVERY_HOPS, stampHops } from "./hops.ts";
import { errorEvent, type RunDeps, storeAndPublish } from "./source-runs.ts";

/** The `error.code` of the `$errors` event of a refused request. */
export const LOOP_ERROR_NAME = "LoopDetected";

/** A source gets one loop error per this long, while that error is still its newest. */
export const LOOP_ERROR_QUIET_MS = 60 * 60 * 1000;

/** When each source last got a loop error, per event store (one process's memory). */
const reported = new WeakMap<object, Map<string, number>>();
const REPORTED_MAX = 1000;

/**
 * Stores the `$errors` event of a request refused as a loop, unless the source got one within
 * {@link LOOP_ERROR_QUIET_MS} that is still its newest error. Refusals at the same moment (a loop
 * that fans out) are collapsed in memory first; on AWS, two function instances may each record
 * one.
 */
export async function recordDeliveryLoop(
  deps: RunDeps,
  source: SourceRecord,
  request: Json,
  hops: number,
): Promise<boolean> {
  const now = deps.clock.nowMs();
  let memory = reported.get(deps.events);
  if (!memory) {
    memory = new Map();
    reported.set(deps.events, memory);
  }
  const last = memory.get(source.id);
  if (last !== undefined && now - last < LOOP_ERROR_QUIET_MS) return false;
  if (memory.size >= REPORTED_MAX) memory.clear();
  memory.set(source.id, now);

  const newest = (await deps.events.listEvents(source.id, { channel: ERRORS_CHANNEL, limit: 1, count: false }))
    .items[0];
  if (newest && isLoopError(newest) && now - newest.indexedAtMs < LOOP_ERROR_QUIET_MS) return false;

  const error = {
    name: LOOP_ERROR_NAME,
    message:
      `a request arrived with ${HOPS_HEADER}: ${hops}: it passed through ${hops} webhook deliveries, more than ` +
      `the ${MAX_DELIVERY_HOPS} allowed, so it was refused (508) without running the source. A webhook that ` +
      "receives this source's events, or events they lead to, points back at its endpoint: remove that " +
      "subscription or webhook. Further refused requests are not recorded one by one.",
    ts: now,
  };
  const event = errorEvent(deps, source, { kind: "run", event: request }, error);
  stampHops([event], hops);
  await storeAndPublish(deps, source, [event], now);
  deps.log.warn("a delivery loop was refused", { source_id: source.id, hops });
  return true;
}

function isLoopError(event: StoredEvent): boolean {
  const error = (event.event as { error?: { code?: unknown } } | null)?.error;
  return error?.code === LOOP_ERROR_NAME;
}
