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
