/**
 * Delivery of delayed emits (`delayed-emits.ts`): each is emitted on its channel, stored and routed
 * like any emit, and its `$in` copy is removed. Local mode's driver
 * (`functions/local-mode/drivers/delayed-emit-driver.ts`) polls for what is due
 * ({@link deliverDueEmits}); on AWS, EventBridge Scheduler invokes the deliverer
 * (`functions/internal/delayed-emit-deliverer.ts`) with one entry's key at its time
 * ({@link deliverScheduledEmit}).
 */
import type { DelayedEmit, DelayedEmitStore, PolledDelayedEmitStore } from "#core/ports/delayed-emits";
import type { Deps } from "#core/ports/deps";
import { DELAYED_CHANNEL } from "./delayed-emits.ts";
import { storeAndPublish } from "./source-runs.ts";

/** Due entries delivered per call. */
export const DELIVERY_BATCH = 100;

export type DeliveryDeps = Pick<Deps, "sources" | "ids" | "usage" | "events" | "bus" | "log">;

/**
 * Emits one delayed emit, removes its `$in` copy, then forgets it. At least once: a crash between
 * the emit and the removal emits it again on the next try. An entry whose source is gone is dropped.
 */
async function deliverEntry(deps: DeliveryDeps, store: DelayedEmitStore, entry: DelayedEmit, nowMs: number) {
  const source = await deps.sources.getSource(entry.sourceId);
  if (source) {
    const event = { channel: entry.channel, event: entry.event, emitId: deps.ids.newSecret(12), meta: entry.meta };
    await storeAndPublish(deps, source, [event], nowMs);
    await deps.events.deleteEvents(entry.sourceId, {
      fromId: entry.inEventId,
      toId: entry.inEventId,
      channel: DELAYED_CHANNEL,
    });
  } else {
    deps.log.warn("delayed emit of a deleted source dropped", { source_id: entry.sourceId });
  }
  await store.remove(entry.sourceId, entry.inEventId);
}

/**
 * Emits up to 100 delayed emits due at `nowMs`, earliest first (local mode's driver).
 * @returns how many entries were handled (delivered or dropped); 100 means more may be due.
 */
export async function deliverDueEmits(
  deps: DeliveryDeps,
  store: PolledDelayedEmitStore,
  nowMs: number,
): Promise<number> {
  const due = await store.due(nowMs, DELIVERY_BATCH);
  for (const entry of due) await deliverEntry(deps, store, entry, nowMs);
  return due.length;
}

/**
 * Emits the delayed emit a schedule fired for (AWS). The entry is read afresh: one that was
 * cancelled (its `$in` event or its source deleted) or already delivered (Scheduler and Lambda
 * deliver at least once) is no longer there, and nothing is emitted.
 * @returns whether it was emitted (or dropped for a deleted source).
 */
export async function deliverScheduledEmit(
  deps: DeliveryDeps & Pick<Deps, "delayedEmits">,
  key: { sourceId: string; inEventId: string },
  nowMs: number,
): Promise<boolean> {
  const store = deps.delayedEmits;
  if (!store) throw new Error("delayed emits are not available in this function");
  const entry = await store.get(key.sourceId, key.inEventId);
  if (!entry) {
    deps.log.info("delayed emit already delivered or cancelled", {
      source_id: key.sourceId,
      in_event_id: key.inEventId,
    });
    return false;
  }
  await deliverEntry(deps, store, entry, nowMs);
  return true;
}
