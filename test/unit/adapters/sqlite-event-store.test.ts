import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it, vi } from "vitest";
import { MIGRATIONS, openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { EVENT_COUNT_MIGRATIONS } from "#adapters/local/sqlite-event-schema";
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

  it("writes an event's JSON text as the caller made it (eventJson) instead of serialising it again", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteEventStore(db);
    // A text JSON.stringify would not make (spaces), so the row shows which one was written.
    await store.appendEvents(
      "dc_a",
      [{ channel: "", event: { a: 1 }, eventJson: '{ "a": 1 }', emitId: "e1", meta: {} }],
      10,
    );
    await store.appendEvents("dc_a", valued(2), 10);
    const rows = db.prepare("SELECT event FROM events WHERE source_id = 'dc_a' ORDER BY n").pluck().all();
    expect(rows).toEqual(['{ "a": 1 }', "2"]);
    expect((await store.listEvents("dc_a", { limit: 10 })).items.map((e) => e.event)).toEqual([2, { a: 1 }]);
  });
});

/**
 * Local mode is one process: a statement whose cost grows with a source's history would hold every
 * other request up for as long as it runs. These tests check that such work is cut into chunks, one
 * per turn of the event loop, with other work (here a `setImmediate`) running in between.
 */
describe("SqliteEventStore work bounded per event-loop turn", () => {
  const CHUNK = 100;
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  /** `store` with `count` default-channel events of `dc_big` (ms 1..), and a few of `dc_small`. */
  async function bigHistory(count: number, options: ConstructorParameters<typeof SqliteEventStore>[1] = {}) {
    const store = new SqliteEventStore(openSqlite(":memory:"), { chunkRows: CHUNK, ...options });
    for (let ms = 1; ms * 250 <= count; ms++) await store.appendEvents("dc_big", events(250), ms);
    await store.appendEvents("dc_small", events(3), 1);
    return store;
  }

  const totalOf = async (store: SqliteEventStore, sourceId: string, channel?: string) =>
    (await store.listEvents(sourceId, { limit: 1, ...(channel === undefined ? {} : { channel }) })).totalCount;

  /** Starts `work`, lets one other turn run, and says whether `work` had already finished by then. */
  async function finishedWithinOneTurn(work: Promise<unknown>): Promise<boolean> {
    let finished = false;
    void work.then(() => (finished = true));
    await nextTurn();
    return finished;
  }

  it("deletes a large range a chunk per turn: other work runs while it goes on, and reads see it shrink", async () => {
    const store = await bigHistory(2000);
    const deletion = store.deleteEvents("dc_big", { toId: "8-249" });
    expect(await finishedWithinOneTurn(deletion)).toBe(false);
    const midway = await totalOf(store, "dc_big");
    expect(midway).toBeGreaterThan(0);
    expect(midway).toBeLessThan(2000);
    // Another source is read and written meanwhile.
    await store.appendEvents("dc_small", events(1), 2);
    expect(await totalOf(store, "dc_small")).toBe(4);
    await deletion;
    expect(await totalOf(store, "dc_big")).toBe(0);
  });

  it("never touches events appended while a deletion to the newest runs", async () => {
    const store = await bigHistory(1000);
    const deletion = store.deleteEvents("dc_big", {});
    await nextTurn();
    const [later] = await store.appendEvents("dc_big", events(1), 100);
    await deletion;
    expect((await store.listEvents("dc_big", { limit: 10 })).items.map((e) => e.id)).toEqual([later?.id]);
    expect(await totalOf(store, "dc_big")).toBe(1);
  });

  it("removes a source's whole history a chunk per turn, then forgets its sequence", async () => {
    const store = await bigHistory(1000);
    const deletion = store.deleteAllEvents("dc_big");
    expect(await finishedWithinOneTurn(deletion)).toBe(false);
    await deletion;
    expect(await totalOf(store, "dc_big")).toBe(0);
    // The sequence went with the last chunk: the source starts over.
    const [again] = await store.appendEvents("dc_big", events(1), 1);
    expect(again?.id).toBe("1-0");
    expect(await totalOf(store, "dc_small")).toBe(3);
  });

  it("trims a channel to keepPerChannel a chunk per turn, oldest first", async () => {
    // Only the sweep trims here (no background trim after appends).
    const store = await bigHistory(1000, { retention: { maxAgeMs: 0, keepPerChannel: 10 }, trimEveryAppends: 1e9 });
    const sweep = store.trimExpired(Date.now());
    expect(await finishedWithinOneTurn(sweep)).toBe(false);
    await expect(sweep).resolves.toBe(990);
    const kept = await store.listEvents("dc_big", { limit: 100 });
    expect(kept.totalCount).toBe(10);
    expect(kept.items.map((e) => e.id)).toEqual(Array.from({ length: 10 }, (_, i) => `4-${249 - i}`));
  });

  it("answers totalCount from counts kept with every write, not by counting the rows", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteEventStore(db, { chunkRows: CHUNK });
    await store.appendEvents("dc_a", [...events(5), ...events(2, "custom"), ...events(3, "$logs")], 1);
    // Rows removed behind the store's back (never done by Sluice) do not change what it reports:
    // the count is read, not computed from the rows.
    db.prepare("DELETE FROM events WHERE source_id = 'dc_a' AND channel = ''").run();
    expect(await totalOf(store, "dc_a")).toBe(7);
    expect(await totalOf(store, "dc_a", "")).toBe(5);
    expect(await totalOf(store, "dc_a", "$logs")).toBe(3);
  });
});

describe("SqliteEventStore counts", () => {
  /** Every count the store reports, and the same counted from the rows. */
  async function countsOf(store: SqliteEventStore, db: SqliteDatabase, sourceId: string, channels: string[]) {
    const reported = { listed: (await store.listEvents(sourceId, { limit: 1 })).totalCount } as Record<string, number>;
    const counted = {
      listed: (
        db
          .prepare("SELECT count(*) AS c FROM events WHERE source_id = ? AND substr(channel, 1, 1) <> '$'")
          .get(sourceId) as { c: number }
      ).c,
    } as Record<string, number>;
    for (const channel of channels) {
      reported[channel] = (await store.listEvents(sourceId, { limit: 1, channel })).totalCount;
      counted[channel] = (
        db.prepare("SELECT count(*) AS c FROM events WHERE source_id = ? AND channel = ?").get(sourceId, channel) as {
          c: number;
        }
      ).c;
    }
    return { reported, counted };
  }

  it("keeps every count equal to the rows through appends, chunked deletions, expiry, trims and a source's deletion", async () => {
    const db = openSqlite(":memory:");
    const store = new SqliteEventStore(db, {
      chunkRows: 7,
      retention: { maxAgeMs: 1000, keepPerChannel: 20 },
      trimEveryAppends: 1e9,
    });
    const channels = ["", "custom", "$logs", "$errors"];
    const expectExact = async () => {
      const { reported, counted } = await countsOf(store, db, "dc_a", channels);
      expect(reported).toEqual(counted);
    };
    for (let ms = 1; ms <= 30; ms++) {
      await store.appendEvents(
        "dc_a",
        Array.from({ length: 5 }, (_, i) => event(channels[(ms + i) % channels.length])),
        10_000 + ms,
      );
    }
    await expectExact();
    await store.deleteEvents("dc_a", { fromId: "10003-0", toId: "10011-2", channel: "custom" });
    await expectExact();
    await store.deleteEvents("dc_a", { fromId: "10005-1", toId: "10009-4" });
    await expectExact();
    await store.trimExpired(11_015);
    await expectExact();
    expect((await store.listEvents("dc_a", { limit: 100, channel: "" })).totalCount).toBeLessThanOrEqual(20);
    await store.deleteAllEvents("dc_a");
    await expectExact();
    expect(db.prepare("SELECT count(*) AS c FROM event_counts WHERE source_id = 'dc_a'").get()).toEqual({ c: 0 });
  });

  it("counts the events a data file already holds when it is upgraded", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-event-counts-"));
    try {
      const file = join(dir, "sluice.db");
      // The file as the version before the counts wrote it.
      const before = MIGRATIONS.indexOf(EVENT_COUNT_MIGRATIONS[0] as string);
      const old = new Database(file);
      for (const sql of MIGRATIONS.slice(0, before)) old.exec(sql);
      old.pragma(`user_version = ${before}`);
      const insert = old.prepare(
        "INSERT INTO events (source_id, ms, n, channel, indexed_at_ms, event, emit_id, meta) VALUES (?, 1, ?, ?, 1, '{}', 'e', '{}')",
      );
      for (const [n, channel] of ["", "", "custom", "$logs"].entries()) insert.run("dc_a", n, channel);
      insert.run("dc_b", 0, "$errors");
      old
        .prepare("INSERT INTO event_sequences (source_id, last_ms, last_n) VALUES ('dc_a', 1, 3), ('dc_b', 1, 0)")
        .run();
      old.close();

      const db = openSqlite(file);
      const store = new SqliteEventStore(db);
      const pages = await Promise.all([
        store.listEvents("dc_a", { limit: 1 }),
        store.listEvents("dc_a", { limit: 1, channel: "" }),
        store.listEvents("dc_a", { limit: 1, channel: "$logs" }),
        store.listEvents("dc_b", { limit: 1 }),
        store.listEvents("dc_b", { limit: 1, channel: "$errors" }),
      ]);
      db.close();
      expect(pages.map((page) => page.totalCount)).toEqual([3, 2, 1, 0, 1]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
