/**
 * The wire views of a stored event, the bottom of core's event modules: the event summary of the
 * history endpoints, and the envelope that the live stream and webhook deliveries both send.
 * Pure: the use cases that read, stream and route events all build on these.
 */
import type { StoredEvent } from "./component-model.ts";

/** Bytes of an event's JSON shown without `expand=event`. */
export const EVENT_PREVIEW_BYTES = 1024;

/** An event summary: `{id, indexed_at_ms, event, metadata}` (rest-api.md "Event summary"). */
export function eventSummaryView(stored: StoredEvent, expand: boolean) {
  const metadata: Record<string, unknown> = {
    emitter_id: stored.sourceId,
    emit_id: stored.emitId,
    name: stored.channel,
  };
  if (stored.meta.id !== undefined) metadata.id = stored.meta.id;
  if (stored.meta.summary !== undefined) metadata.summary = stored.meta.summary;
  if (stored.meta.ts !== undefined) metadata.ts = stored.meta.ts;
  // A pending delayed emit (`$in`) says when it is due.
  if (stored.meta.delivery_ts !== undefined) metadata.delivery_ts = stored.meta.delivery_ts;
  let event: unknown = stored.event;
  if (!expand) {
    const json = JSON.stringify(stored.event);
    const size = Buffer.byteLength(json);
    if (size > EVENT_PREVIEW_BYTES) {
      event = {
        $truncated: true,
        size_bytes: size,
        preview: Buffer.from(json).subarray(0, EVENT_PREVIEW_BYTES).toString("utf8"),
      };
      metadata.truncated = true;
    }
  }
  return { id: stored.id, indexed_at_ms: stored.indexedAtMs, event, metadata };
}

/**
 * The JSON of a message's `data:`. It reads both ways real-behaviour.md §1.1 allows: as an event
 * summary with full data (`id`, `indexed_at_ms`, `event`, `metadata`, as `event_summaries?expand=event`
 * returns it) and as the original's emit record (`e` the event, `k: "emit"`, `ts` in epoch ms,
 * `sum` the summary when there is one). `metadata.name` is `name`: the channel, or for a workflow's
 * stream the channel its `$.send.sse` gave, as the message's `event:` is.
 */
export function sseEnvelope(stored: StoredEvent, name = stored.channel) {
  const summary = eventSummaryView(stored, true);
  summary.metadata.name = name;
  const envelope: Record<string, unknown> = { ...summary, k: "emit", e: stored.event, ts: stored.indexedAtMs };
  if (stored.meta.summary !== undefined) envelope.sum = stored.meta.summary;
  return envelope;
}
