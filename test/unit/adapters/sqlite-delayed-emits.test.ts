import { describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDelayedEmits } from "#adapters/local/sqlite-delayed-emits";

const NOW = Date.UTC(2026, 10, 26, 12);

describe("SqliteDelayedEmits", () => {
  const entry = (sourceId: string, inEventId: string, dueMs: number) => ({
    sourceId,
    inEventId,
    dueMs,
    channel: "later",
    event: { inEventId },
    meta: { id: inEventId },
  });

  it("hands out due entries earliest first, counts per source and forgets ranges of $in ids", async () => {
    const db = openSqlite(":memory:");
    try {
      const store = new SqliteDelayedEmits(db);
      await store.add([
        entry("dc_a", "100-0", NOW + 30),
        entry("dc_a", "100-1", NOW + 10),
        entry("dc_a", "101-0", NOW + 20),
        entry("dc_b", "100-0", NOW + 5),
      ]);
      expect(await store.countPending("dc_a")).toBe(3);
      expect((await store.due(NOW + 20, 10)).map((e) => [e.sourceId, e.inEventId])).toEqual([
        ["dc_b", "100-0"],
        ["dc_a", "100-1"],
        ["dc_a", "101-0"],
      ]);
      expect(await store.due(NOW + 20, 1)).toHaveLength(1);
      await store.removeRange("dc_a", "100-1", "101-0");
      expect((await store.due(NOW + 100, 10)).map((e) => e.inEventId)).toEqual(["100-0", "100-0"]);
      await store.remove("dc_b", "100-0");
      await store.removeRange("dc_a");
      expect(await store.due(NOW + 100, 10)).toEqual([]);
    } finally {
      db.close();
    }
  });
});
