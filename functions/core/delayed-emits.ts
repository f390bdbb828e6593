/**
 * Delayed emits: `this.$emit(event, {delivery_ts})` stores the event on the source's `$in`
 * channel now and emits it on its own channel at `delivery_ts` (real-behaviour.md §1.6; the
 * registry's task scheduler emits to its `self` channel this way). Cancelling is deleting the `$in`
 * event (`DELETE /v1/sources/{id}/events?event_name=$in&start_id=X&end_id=X`).
 *
 * Bounds: at most {@link DELAYED_EMIT_MAX_AHEAD_MS} ahead and {@link DELAYED_EMITS_MAX_PENDING}
 * waiting per source; an emit past either is refused (one `$errors` event says how many). A
 * `delivery_ts` not past now by more than {@link DELAYED_EMIT_SLACK_MS} is an ordinary emit.
 * The run stores the `$in` events with its other events (`applyResult`); delivery is
 * `deliverDueEmits` in `delayed-emit-delivery.ts`. Pure.
 */
import type { EmitMeta, EmitRecord, ErrorRecord } from "#runtime/protocol";
import { channelName } from "./channels.ts";
import type { NewEvent, StoredEvent } from "./component-model.ts";
import type { DelayedEmit } from "./ports/delayed-emits.ts";

/** The channel pending delayed emits are listed on. */
export const DELAYED_CHANNEL = "$in";
/** How far ahead a delayed emit may be: 30 days. */
export const DELAYED_EMIT_MAX_AHEAD_MS = 30 * 24 * 60 * 60 * 1000;
/** Delayed emits one source may have waiting. */
export const DELAYED_EMITS_MAX_PENDING = 1000;
/** A `delivery_ts` this close to now, or past, is emitted at once. */
export const DELAYED_EMIT_SLACK_MS = 1000;

/** The emits of a run that are delayed, apart from the ones emitted at once. */
export function splitDelayed(
  emits: readonly EmitRecord[],
  nowMs: number,
): { immediate: EmitRecord[]; delayed: EmitRecord[] } {
  const immediate: EmitRecord[] = [];
  const delayed: EmitRecord[] = [];
  for (const emit of emits) {
    const due = emit.meta.delivery_ts;
    (due !== undefined && due > nowMs + DELAYED_EMIT_SLACK_MS ? delayed : immediate).push(emit);
  }
  return { immediate, delayed };
}

/**
 * The `$in` events of a run's delayed emits, within the bounds (`pending` wait already), and the
 * refusal of the others for `$errors`. Never deduplicated here: dedupe applies to the emit a
 * delivery leads to (the task scheduler re-emits the same id when its event comes back).
 */
export function planDelayedEmits(
  delayed: readonly EmitRecord[],
  pending: number,
  nowMs: number,
  newEmitId: () => string,
): { inEvents: NewEvent[]; refusal?: ErrorRecord } {
  const room = Math.max(0, DELAYED_EMITS_MAX_PENDING - pending);
  const inEvents: NewEvent[] = [];
  let tooFar = 0;
  let overCount = 0;
  for (const emit of delayed) {
    if ((emit.meta.delivery_ts as number) > nowMs + DELAYED_EMIT_MAX_AHEAD_MS) tooFar += 1;
    else if (inEvents.length >= room) overCount += 1;
    else {
      inEvents.push({
        channel: DELAYED_CHANNEL,
        event: emit.event ?? null,
        emitId: newEmitId(),
        meta: { ...emit.meta, name: channelName(emit.meta.name) },
      });
    }
  }
  if (tooFar === 0 && overCount === 0) return { inEvents };
  const reasons = [
    ...(tooFar > 0 ? [`${tooFar} with a delivery_ts more than 30 days ahead`] : []),
    ...(overCount > 0
      ? [`${overCount} past the ${DELAYED_EMITS_MAX_PENDING} delayed emits a source may have waiting`]
      : []),
  ];
  const refusal: ErrorRecord = {
    name: "DelayedEmitError",
    message: `delayed emits were refused: ${reasons.join(", ")}; the others were scheduled`,
    ts: nowMs,
  };
  return { inEvents, refusal };
}

/** The entries to schedule for the `$in` events a run stored (others are ignored). */
export function delayedEntriesOf(stored: readonly StoredEvent[]): DelayedEmit[] {
  return stored
    .filter((event) => event.channel === DELAYED_CHANNEL && event.meta.delivery_ts !== undefined)
    .map((event) => {
      const { hops: _hops, delivery_ts: dueMs, name, ...rest } = event.meta;
      const channel = channelName(name);
      const meta: EmitMeta = channel === "" ? rest : { ...rest, name: channel };
      return {
        sourceId: event.sourceId,
        inEventId: event.id,
        dueMs: dueMs as number,
        channel,
        event: event.event,
        meta,
      };
    });
}
