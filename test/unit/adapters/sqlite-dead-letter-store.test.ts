import { describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import type { DeadLetterRecord } from "#core/subscription-model";

const deadLetter = (webhookId: string, n: number): DeadLetterRecord => ({
  id: `dlv_${String(n).padStart(8, "0")}`,
  target: { kind: "webhook", webhookId },
  subscriptionIds: ["sub_a"],
  emitterId: "dc_a",
  eventId: `1790000000000-${n}`,
  channel: "",
  payload: { n },
  attempts: 8,
  nextAttemptAt: 1,
  createdAt: 1,
  userId: "u_a",
  failedAt: 2,
});

/** A webhook whose receiver was down long enough leaves a dead letter per event: as many as its history. */
async function storeWith(counts: Record<string, number>, chunkRows = 100) {
  const db = openSqlite(":memory:");
  const store = new SqliteDeadLetterStore(db, { chunkRows });
  for (const [webhookId, count] of Object.entries(counts)) {
    for (let n = 0; n < count; n++) await store.putDeadLetter(deadLetter(webhookId, n));
  }
  return { db, store };
}

const totalOf = async (store: SqliteDeadLetterStore, webhookId: string) =>
  (await store.listDeadLetters(webhookId, { limit: 1 })).totalCount;

describe("SqliteDeadLetterStore work bounded per event-loop turn", () => {
  it("deletes a webhook's dead letters a chunk per turn, so other work runs while it goes on", async () => {
    const { store } = await storeWith({ wh_big: 1000, wh_other: 3 });
    let finished = false;
    const deletion = store.deleteDeadLettersOf("wh_big").then(() => (finished = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(finished).toBe(false);
    const midway = await totalOf(store, "wh_big");
    expect(midway).toBeGreaterThan(0);
    expect(midway).toBeLessThan(1000);
    await deletion;
    expect(await totalOf(store, "wh_big")).toBe(0);
    expect((await store.listDeadLetters("wh_big", { limit: 10 })).items).toEqual([]);
    expect(await totalOf(store, "wh_other")).toBe(3);
  });

  it("answers totalCount from a count kept with every write, not by counting the rows", async () => {
    const { db, store } = await storeWith({ wh_a: 5 });
    // Put again (a replay that failed again) replaces, and does not count twice.
    await store.putDeadLetter({ ...deadLetter("wh_a", 2), attempts: 9 });
    expect(await store.deleteDeadLetter("wh_a", "dlv_00000004")).toBe(true);
    expect(await store.deleteDeadLetter("wh_a", "dlv_00000004")).toBe(false);
    expect(await totalOf(store, "wh_a")).toBe(4);
    // Rows removed behind the store's back (never done by Sluice) do not change what it reports.
    db.prepare("DELETE FROM dead_letters WHERE webhook_id = 'wh_a'").run();
    expect(await totalOf(store, "wh_a")).toBe(4);
  });
});
