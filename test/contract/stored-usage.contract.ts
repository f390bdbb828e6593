import { describe, expect, it } from "vitest";
import type { NewEvent } from "#core/component-model";
import type { EventStore } from "#core/ports/event-store";
import type { UsageStore } from "#core/ports/usage-store";
import { storedSize } from "#core/source-runs";

/** An event store and a usage store on the same storage, as a platform's composition builds them. */
export interface StoragePair {
  events: EventStore;
  usage: UsageStore;
  /** Lets time pass to `nowMs` for retention: a sweep locally, the clock of the day buckets on AWS. */
  expireAt(nowMs: number): Promise<void>;
}

const DAY_MS = 86_400_000;

const newEvents = (count: number, text: string): NewEvent[] =>
  Array.from({ length: count }, (_, n) => ({
    channel: n % 2 ? "" : "$logs",
    event: { n, text },
    emitId: `e${n}`,
    meta: { summary: `event ${n} — ünïcode` },
  }));

/**
 * Stored totals follow the events on each platform: what core adds when it appends, the storage
 * subtracts where events are removed (docs/components.md "Limits"). `makePair(maxAgeMs)` returns
 * fresh, empty stores.
 */
export function storedUsageContract(makePair: (maxAgeMs: number) => Promise<StoragePair>) {
  describe("stored totals and removals", () => {
    /** Appends as `storeAndPublish` does: counted, then stored. */
    async function append(pair: StoragePair, sourceId: string, events: NewEvent[], nowMs: number) {
      await pair.usage.addStored("o_ws", sourceId, nowMs, storedSize(events));
      return pair.events.appendEvents(sourceId, events, nowMs);
    }

    it("subtracts exactly what a range deletion removes, once purged, and everything a source's deletion removes", async () => {
      const pair = await makePair(0);
      const now = Date.now();
      const first = newEvents(4, "first");
      const stored = await append(pair, "dc_a", first, now);
      await append(pair, "dc_b", newEvents(2, "other source"), now);
      const all = storedSize([...first, ...newEvents(2, "other source")]);
      expect(await pair.usage.getStored("o_ws")).toEqual(all);

      // The first two events of dc_a, on every channel.
      await pair.events.deleteEvents("dc_a", { toId: stored[1]?.id as string });
      await pair.events.purgeDeletedEvents("dc_a");
      const removed = storedSize(first.slice(0, 2));
      expect(await pair.usage.getStored("o_ws")).toEqual({
        events: all.events - removed.events,
        bytes: all.bytes - removed.bytes,
      });

      await pair.events.deleteAllEvents("dc_a");
      await pair.events.deleteAllEvents("dc_b");
      expect(await pair.usage.getStored("o_ws")).toEqual({ events: 0, bytes: 0 });
    });

    it("stops counting events once the retention has removed them", async () => {
      const pair = await makePair(DAY_MS);
      const now = Date.now();
      const old = newEvents(3, "old");
      const recent = newEvents(1, "recent");
      await append(pair, "dc_a", old, now - 3 * DAY_MS);
      await append(pair, "dc_a", recent, now);
      await pair.expireAt(now);
      expect(await pair.usage.getStored("o_ws")).toEqual(storedSize(recent));
    });
  });
}
