import { describe, expect, it } from "vitest";
import { LOGS_CHANNEL, type NewEvent, type StoredEvent } from "#core/component-model";
import { slicePage } from "#core/pagination";
import type { EventQuery, EventStore } from "#ports/event-store";

let emits = 0;
function newEvent(channel = "", event: NewEvent["event"] = { n: emits }): NewEvent {
  emits += 1;
  return { channel, event, emitId: `emit-${emits}`, meta: { id: `dedupe-${emits}`, summary: `event ${emits}`, ts: 7 } };
}

/** (ms, n) as a string that sorts like the numbers: the order slicePage must be given. */
function orderKey(id: string): string {
  const [ms, n] = id.split("-");
  return `${ms!.padStart(15, "0")}-${n!.padStart(9, "0")}`;
}
const keyOf = (event: StoredEvent) => orderKey(event.id);
const newestFirst = (events: StoredEvent[]) =>
  [...events].sort((a, b) => (keyOf(a) < keyOf(b) ? 1 : keyOf(a) > keyOf(b) ? -1 : 0));
const parse = (id: string) => id.split("-").map(Number) as [number, number];

/** The reference page: slicePage over the padded order, with the cursor given as an event id. */
function expectedPage(all: StoredEvent[], query: EventQuery) {
  const selected = newestFirst(
    all.filter((e) => (query.channel === undefined ? !e.channel.startsWith("$") : e.channel === query.channel)),
  );
  return slicePage(selected, keyOf, {
    limit: query.limit,
    ...(query.after === undefined ? {} : { after: orderKey(query.after) }),
    ...(query.before === undefined ? {} : { before: orderKey(query.before) }),
  });
}

/** Behaviour every `EventStore` adapter must have. `makeStore` returns an empty store. */
export function eventStoreContract(makeStore: () => Promise<EventStore>) {
  describe("EventStore", () => {
    it("assigns ids <nowMs>-0, -1, ... in the given order and reads the events back newest first", async () => {
      const store = await makeStore();
      const input = [newEvent(), newEvent("custom", { nested: [1, null, "é✓", { a: true }] }), newEvent(LOGS_CHANNEL)];
      const stored = await store.appendEvents("dc_a", input, 1_790_000_000_123);
      expect(stored).toStrictEqual(
        input.map((event, n) => ({
          sourceId: "dc_a",
          id: `1790000000123-${n}`,
          indexedAtMs: 1_790_000_000_123,
          ...event,
        })),
      );
      expect(await store.listEvents("dc_a", { limit: 10 })).toStrictEqual({
        items: stored.slice(0, 2).reverse(),
        totalCount: 2,
      });
      expect(await store.listEvents("dc_a", { limit: 10, channel: LOGS_CHANNEL })).toStrictEqual({
        items: stored.slice(2),
        totalCount: 1,
      });
    });

    it("continues the counter within the same ms and restarts it at 0 in a later ms", async () => {
      const store = await makeStore();
      const first = await store.appendEvents("dc_a", [newEvent(), newEvent()], 5000);
      const second = await store.appendEvents("dc_a", [newEvent()], 5000);
      const third = await store.appendEvents("dc_a", [newEvent()], 5001);
      expect([...first, ...second, ...third].map((e) => e.id)).toEqual(["5000-0", "5000-1", "5000-2", "5001-0"]);
    });

    it("never goes below the newest id when the clock goes backwards", async () => {
      const store = await makeStore();
      await store.appendEvents("dc_a", [newEvent(), newEvent()], 2000);
      const behind = await store.appendEvents("dc_a", [newEvent()], 1500);
      expect(behind.map((e) => e.id)).toEqual(["2000-2"]);
      expect(behind[0]?.indexedAtMs).toBe(1500);
      const further = await store.appendEvents("dc_a", [newEvent()], 999);
      expect(further.map((e) => e.id)).toEqual(["2000-3"]);
      const ahead = await store.appendEvents("dc_a", [newEvent()], 2500);
      expect(ahead.map((e) => e.id)).toEqual(["2500-0"]);
    });

    // DynamoDB Local takes tens of ms per transaction on a small machine: a bounded, longer budget.
    it("hands out 300 distinct, gapless ids in one ms to concurrent appenders, each in increasing order", {
      timeout: 120_000,
    }, async () => {
      const store = await makeStore();
      const chains = 3;
      const perChain = 100;
      const ids = await Promise.all(
        Array.from({ length: chains }, async () => {
          const mine: string[] = [];
          for (let i = 0; i < perChain; i++) {
            const [event] = await store.appendEvents("dc_busy", [newEvent()], 1_790_000_000_000);
            mine.push(event!.id);
          }
          return mine;
        }),
      );
      for (const chain of ids) {
        const numbers = chain.map((id) => parse(id));
        numbers.slice(1).forEach(([ms, n], i) => {
          expect(ms).toBe(1_790_000_000_000);
          expect(n).toBeGreaterThan(numbers[i]![1]);
        });
      }
      const ns = ids.flat().map((id) => parse(id)[1]);
      expect(ns.sort((a, b) => a - b)).toEqual(Array.from({ length: chains * perChain }, (_, n) => n));
      const listed = await store.listEvents("dc_busy", { limit: 100 });
      expect(listed.totalCount).toBe(300);
      expect(listed.items[0]?.id).toBe("1790000000000-299");
    });

    it("orders ids numerically, not as strings (n past 9, ms of different lengths)", async () => {
      const store = await makeStore();
      await store.appendEvents(
        "dc_a",
        Array.from({ length: 12 }, () => newEvent()),
        999,
      );
      await store.appendEvents("dc_a", [newEvent()], 1000);
      const listed = await store.listEvents("dc_a", { limit: 4 });
      expect(listed.items.map((e) => e.id)).toEqual(["1000-0", "999-11", "999-10", "999-9"]);
      const older = await store.listEvents("dc_a", { limit: 2, after: "999-10" });
      expect(older.items.map((e) => e.id)).toEqual(["999-9", "999-8"]);
    });

    it("filters by channel, counting only that channel; no channel means all but the reserved ones", async () => {
      const store = await makeStore();
      await store.appendEvents("dc_a", [newEvent(""), newEvent("custom"), newEvent(LOGS_CHANNEL), newEvent("")], 100);
      await store.appendEvents("dc_a", [newEvent("custom")], 101);

      const defaults = await store.listEvents("dc_a", { limit: 10, channel: "" });
      expect(defaults.items.map((e) => e.id)).toEqual(["100-3", "100-0"]);
      expect(defaults.totalCount).toBe(2);
      const custom = await store.listEvents("dc_a", { limit: 10, channel: "custom" });
      expect(custom.items.map((e) => [e.id, e.channel])).toEqual([
        ["101-0", "custom"],
        ["100-1", "custom"],
      ]);
      expect((await store.listEvents("dc_a", { limit: 10, channel: LOGS_CHANNEL })).totalCount).toBe(1);
      expect(await store.listEvents("dc_a", { limit: 10, channel: "none" })).toEqual({ items: [], totalCount: 0 });
      // Without a channel: every channel but the reserved `$logs` / `$errors`.
      const all = await store.listEvents("dc_a", { limit: 10 });
      expect(all.items.map((e) => e.id)).toEqual(["101-0", "100-3", "100-1", "100-0"]);
      expect(all.totalCount).toBe(4);
    });

    it("pages with event-id cursors exactly like slicePage, per channel and across channels", async () => {
      const store = await makeStore();
      const all: StoredEvent[] = [];
      const channels = ["", "custom", LOGS_CHANNEL];
      for (let ms = 98; ms < 104; ms++) {
        const batch = Array.from({ length: 1 + ((ms * 7) % 13) }, (_, i) => newEvent(channels[(ms + i) % 3]));
        all.push(...(await store.appendEvents("dc_paged", batch, ms)));
      }
      await store.appendEvents("dc_other", [newEvent(), newEvent("custom")], 100);
      // Every third id (the first and last among them) and positions that are no event's id.
      const sampled = all.filter((_, i) => i % 3 === 0 || i === all.length - 1).map((e) => e.id);
      const cursors = [...sampled, "0-0", "99-5", "999999-0", "101-999"];
      for (const channel of [undefined, "", "custom"]) {
        const queries: EventQuery[] = [
          { limit: 10 },
          { limit: 100 },
          ...cursors.flatMap((cursor) => [
            { limit: 7, after: cursor },
            { limit: 7, before: cursor },
          ]),
        ];
        for (const base of queries) {
          const query = channel === undefined ? base : { ...base, channel };
          expect(await store.listEvents("dc_paged", query), JSON.stringify(query)).toStrictEqual(
            expectedPage(all, query),
          );
        }
      }
    });

    it("keeps sources apart and answers an empty page for a source without events", async () => {
      const store = await makeStore();
      await store.appendEvents("dc_a", [newEvent()], 1);
      expect(await store.listEvents("dc_b", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
      expect(await store.listEvents("dc_b", { limit: 10, channel: "" })).toEqual({ items: [], totalCount: 0 });
      expect(await store.appendEvents("dc_b", [], 5)).toEqual([]);
      expect(await store.listEvents("dc_b", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
    });

    it("deletes every event of a source in every channel, idempotently, and leaves other sources alone", async () => {
      const store = await makeStore();
      await store.appendEvents(
        "dc_a",
        Array.from({ length: 60 }, (_, i) => newEvent(i % 2 === 0 ? "" : "custom")),
        10,
      );
      await store.appendEvents("dc_a", [newEvent(LOGS_CHANNEL)], 11);
      const kept = await store.appendEvents("dc_b", [newEvent()], 10);

      await store.deleteAllEvents("dc_a");
      expect(await store.listEvents("dc_a", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
      for (const channel of ["", "custom", LOGS_CHANNEL]) {
        expect(await store.listEvents("dc_a", { limit: 10, channel })).toEqual({ items: [], totalCount: 0 });
      }
      await expect(store.deleteAllEvents("dc_a")).resolves.toBeUndefined();
      await expect(store.deleteAllEvents("dc_never")).resolves.toBeUndefined();
      expect(await store.listEvents("dc_b", { limit: 10 })).toStrictEqual({ items: kept, totalCount: 1 });

      const again = await store.appendEvents("dc_a", [newEvent()], 20);
      expect(await store.listEvents("dc_a", { limit: 10 })).toStrictEqual({ items: again, totalCount: 1 });
    });

    it("stores a batch larger than one write can take, in order, with consecutive ids", async () => {
      const store = await makeStore();
      const stored = await store.appendEvents(
        "dc_a",
        Array.from({ length: 230 }, () => newEvent()),
        42,
      );
      expect(stored.map((e) => e.id)).toEqual(Array.from({ length: 230 }, (_, n) => `42-${n}`));
      const listed = await store.listEvents("dc_a", { limit: 100, after: "42-130" });
      expect(listed.items.map((e) => e.id)).toEqual(Array.from({ length: 100 }, (_, i) => `42-${129 - i}`));
      expect(listed.totalCount).toBe(230);
    });

    it("stores an event of 250 KB intact", async () => {
      const store = await makeStore();
      const body = "x✓".repeat(250 * 256);
      const [stored] = await store.appendEvents("dc_a", [newEvent("", { body })], 1);
      const listed = await store.listEvents("dc_a", { limit: 1 });
      expect(listed.items[0]).toStrictEqual(stored);
      expect((listed.items[0]!.event as { body: string }).body === body).toBe(true);
    });
  });
}
