/**
 * Delivery of the delayed emits that are due (`delayed-emits.ts`): each is emitted on its channel,
 * stored and routed like any emit, and its `$in` copy is removed. Called by local mode's driver
 * (`functions/local-mode/drivers/delayed-emit-driver.ts`).
 */
import type { Deps } from "#core/ports/deps";
import { DELAYED_CHANNEL } from "./delayed-emits.ts";
import { storeAndPublish } from "./source-runs.ts";

/** Due entries delivered per call. */
const DELIVERY_BATCH = 100;

/**
 * Emits up to 100 delayed emits due at `nowMs`, earliest first. At least once: a crash between an
 * emit and its removal emits it again at the next start. An entry whose source is gone is dropped.
 * @returns how many entries were handled (delivered or dropped); 100 means more may be due.
 */
export async function deliverDueEmits(
  deps: Pick<Deps, "delayedEmits" | "sources" | "ids" | "usage" | "events" | "bus" | "log">,
  nowMs: number,
): Promise<number> {
  const store = deps.delayedEmits;
  if (!store) return 0;
  const due = await store.due(nowMs, DELIVERY_BATCH);
  for (const entry of due) {
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
  return due.length;
}
