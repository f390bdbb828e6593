import { describe, expect, it, vi } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import type { NewEvent } from "#core/component-model";

const event = (channel = ""): NewEvent => ({ channel, event: {}, emitId: "emit", meta: {} });
const events = (count: number, channel = "") => Array.from({ length: count }, () => event(channel));

describe("SqliteEventStore retention", () => {
  it("trims each channel to keepPerChannel in the background once trimEveryAppends events came in", async () => {
    const store = new SqliteEventStore(openSqlite(":memory:"), {
      retention: { maxAgeMs: 0, keepPerChannel: 4 },
      trimEveryAppends: 10,
    });
    await store.appendEvents("dc_a", events(6), 1);
    await store.appendEvents("dc_a", events(3, "$logs"), 2);
    // 9 appended: below the threshold, nothing is trimmed, however long we wait for it.
    await new Promise((resolve) => setImmediate(resolve));
    expect((await store.listEvents("dc_a", { limit: 100, channel: "" })).totalCount).toBe(6);

    await store.appendEvents("dc_a", events(1), 3);
    await vi.waitFor(
      async () => {
        const page = await store.listEvents("dc_a", { limit: 100, channel: "" });
        expect(page.items.map((e) => e.id)).toEqual(["3-0", "1-5", "1-4", "1-3"]);
      },
      { timeout: 10_000, interval: 10 },
    );
    expect((await store.listEvents("dc_a", { limit: 100, channel: "$logs" })).totalCount).toBe(3);
  });

  it("removes expired events in chunks, across sources, and reports how many", async () => {
    const store = new SqliteEventStore(openSqlite(":memory:"), { retention: { maxAgeMs: 1000, keepPerChannel: 0 } });
    await store.appendEvents("dc_a", events(4500), 10_000);
    await store.appendEvents("dc_a", events(2, "$errors"), 10_500);
    await store.appendEvents("dc_a", events(3), 12_000);
    await store.appendEvents("dc_b", events(5), 10_900);

    // Older than 1000 ms at 11_900: ms < 10_900.
    await expect(store.trimExpired(11_900)).resolves.toBe(4502);
    expect((await store.listEvents("dc_a", { limit: 10 })).totalCount).toBe(3);
    expect((await store.listEvents("dc_a", { limit: 10, channel: "$errors" })).totalCount).toBe(0);
    expect((await store.listEvents("dc_b", { limit: 10 })).totalCount).toBe(5);
    await expect(store.trimExpired(11_900)).resolves.toBe(0);
  });

  it("keeps the sequence through retention, so ids never go back", async () => {
    const store = new SqliteEventStore(openSqlite(":memory:"), { retention: { maxAgeMs: 1000, keepPerChannel: 0 } });
    await store.appendEvents("dc_a", events(2), 10_000);
    await store.trimExpired(20_000);
    const [next] = await store.appendEvents("dc_a", events(1), 5_000);
    expect(next?.id).toBe("10000-2");
  });
});

describe("SqliteEventStore grouped appends", () => {
  const valued = (...values: number[]): NewEvent[] =>
    values.map((value) => ({ channel: "", event: value, emitId: `em_${value}`, meta: {} }));

  it("writes one turn's appends of several sources together; each caller gets its own events, in call order", async () => {
    const store = new SqliteEventStore(openSqlite(":memory:"));
    const resolved: string[] = [];
    const appends = [
      store.appendEvents("dc_a", valued(1, 2), 10),
      store.appendEvents("dc_b", valued(3), 10),
      store.appendEvents("dc_a", valued(4), 9),
      store.appendEvents("dc_a", [], 10),
    ].map((append, index) =>
      append.then((stored) => {
        resolved.push(`#${index}`);
        return stored;
      }),
    );
    const [a1, b1, a2, none] = await Promise.all(appends);
    expect(a1?.map((e) => [e.sourceId, e.id, e.event])).toEqual([
      ["dc_a", "10-0", 1],
      ["dc_a", "10-1", 2],
    ]);
    expect(b1?.map((e) => [e.sourceId, e.id, e.event])).toEqual([["dc_b", "10-0", 3]]);
    // A later call of the same source gets later ids, even with an earlier clock.
    expect(a2?.map((e) => [e.id, e.event])).toEqual([["10-2", 4]]);
    expect(none).toEqual([]);
    // Resolved in call order (the empty append at once), so publishes that follow come in id order.
    expect(resolved).toEqual(["#3", "#0", "#1", "#2"]);
    expect((await store.listEvents("dc_a", { limit: 10 })).items.map((e) => e.id)).toEqual(["10-2", "10-1", "10-0"]);
    // The sequence the turn committed is its last append's, per source.
    const [a3, b2] = await Promise.all([
      store.appendEvents("dc_a", valued(5), 10),
      store.appendEvents("dc_b", valued(6), 10),
    ]);
    expect([a3?.[0]?.id, b2?.[0]?.id]).toEqual(["10-3", "10-1"]);
  });

  it("a read or delete called after an append sees it, even before the append's promise resolved", async () => {
    const store = new SqliteEventStore(openSqlite(":memory:"));
    const appended = store.appendEvents("dc_a", valued(1, 2, 3), 10);
    expect((await store.listEvents("dc_a", { limit: 10 })).totalCount).toBe(3);
    await expect(appended).resolves.toHaveLength(3);
    const again = store.appendEvents("dc_a", valued(4), 10);
    await store.deleteAllEvents("dc_a");
    await again;
    expect((await store.listEvents("dc_a", { limit: 10 })).items).toEqual([]);
  });

  it("one append that fails does not fail the others of its turn", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteEventStore(db, {
      outbox: {
        record: (sourceId) => {
          if (sourceId === "dc_bad") throw new Error("disk full");
        },
      },
    });
    const [good, bad, alsoGood] = await Promise.allSettled([
      store.appendEvents("dc_a", valued(1), 10),
      store.appendEvents("dc_bad", valued(2), 10),
      store.appendEvents("dc_a", valued(3), 10),
    ]);
    expect(good).toMatchObject({ status: "fulfilled", value: [{ id: "10-0", event: 1 }] });
    expect(bad).toMatchObject({ status: "rejected", reason: new Error("disk full") });
    expect(alsoGood).toMatchObject({ status: "fulfilled", value: [{ id: "10-1", event: 3 }] });
    expect((await store.listEvents("dc_bad", { limit: 10 })).items).toEqual([]);
    expect((await store.listEvents("dc_a", { limit: 10 })).totalCount).toBe(2);
  });
});
