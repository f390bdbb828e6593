import { describe, expect, it } from "vitest";
import { slicePage } from "#core/pagination";
import type { DeadLetterStore } from "#core/ports/dead-letter-store";
import { type DeadLetterRecord, destinationOf } from "#core/subscription-model";
import { byId, newestFirst, nextId, pageQueries } from "./subscription-store.contract.ts";

function deadLetter({
  webhookId = "wh_hook",
  ...overrides
}: Partial<DeadLetterRecord> & { webhookId?: string } = {}): DeadLetterRecord {
  return {
    id: nextId("delivery"),
    target: { kind: "webhook", webhookId },
    subscriptionIds: ["sub_first", "sub_second"],
    emitterId: "dc_source",
    eventId: "1790000000000-0",
    channel: "",
    payload: {
      event: { body: { nested: [1, "two", null, true, { deep: "é✓" }] }, empty: "" },
      metadata: { emitter_id: "dc_source", ts: 1_790_000_000_000 },
    },
    attempts: 8,
    nextAttemptAt: 1_790_000_100_000,
    createdAt: 1_790_000_000_000,
    lastError: "HTTP 503",
    userId: "u_ada",
    failedAt: 1_790_000_200_000,
    ...overrides,
  };
}

/** Behaviour every `DeadLetterStore` adapter must have. `makeStore` returns an empty store. */
export function deadLetterStoreContract(makeStore: () => Promise<DeadLetterStore>) {
  describe("DeadLetterStore", () => {
    it("reads back a dead letter exactly as written, under its webhook only", async () => {
      const store = await makeStore();
      const stored = deadLetter();
      await store.putDeadLetter(stored);
      expect(await store.getDeadLetter(destinationOf(stored), stored.id)).toStrictEqual(stored);
      expect(await store.getDeadLetter("wh_other", stored.id)).toBeUndefined();
      expect(await store.getDeadLetter(destinationOf(stored), nextId("delivery"))).toBeUndefined();
      expect(await store.listDeadLetters(destinationOf(stored), { limit: 10 })).toStrictEqual({
        items: [stored],
        totalCount: 1,
      });
    });

    it("keeps a workflow send's dead letter, its target whole, under the workflow's p_ only", async () => {
      const store = await makeStore();
      const http = deadLetter({
        target: {
          kind: "http",
          workflowId: "p_flow",
          request: { method: "PUT", url: "https://example.com/x", auth: { username: "u", password: "p" }, data: [1] },
        },
        subscriptionIds: [],
        payload: null,
      });
      const s3 = deadLetter({
        target: { kind: "s3", workflowId: "p_flow", bucket: "logs", key: "a/run_1-0.json", body: { n: 1 } },
        subscriptionIds: [],
        payload: null,
      });
      await store.putDeadLetter(http);
      await store.putDeadLetter(s3);
      expect(await store.getDeadLetter("p_flow", http.id)).toStrictEqual(http);
      expect(await store.getDeadLetter("p_flow", s3.id)).toStrictEqual(s3);
      expect(await store.getDeadLetter("wh_hook", http.id)).toBeUndefined();
      expect((await store.listDeadLetters("p_flow", { limit: 10 })).totalCount).toBe(2);
    });

    it("keeps optional and edge-case fields exact: no last error, no subscriptions, scalar payloads", async () => {
      const store = await makeStore();
      const { lastError: _none, ...withoutError } = deadLetter({ subscriptionIds: [], payload: null });
      const scalar = deadLetter({ payload: "just a string", channel: "$errors" });
      await store.putDeadLetter(withoutError);
      await store.putDeadLetter(scalar);
      expect(await store.getDeadLetter(destinationOf(withoutError), withoutError.id)).toStrictEqual(withoutError);
      expect(await store.getDeadLetter(destinationOf(scalar), scalar.id)).toStrictEqual(scalar);
    });

    it("replaces a dead letter put again with the same id (a replay that failed again)", async () => {
      const store = await makeStore();
      const first = deadLetter();
      await store.putDeadLetter(first);
      const again = { ...first, attempts: 16, lastError: "timeout after 10000 ms", failedAt: first.failedAt + 5 };
      await store.putDeadLetter(again);
      expect(await store.getDeadLetter(destinationOf(first), first.id)).toStrictEqual(again);
      expect(await store.listDeadLetters(destinationOf(first), { limit: 10 })).toStrictEqual({
        items: [again],
        totalCount: 1,
      });
    });

    it("pages a webhook's dead letters newest first by id exactly like slicePage", async () => {
      const store = await makeStore();
      const mine: DeadLetterRecord[] = [];
      for (let i = 0; i < 23; i++) {
        const stored = deadLetter({ webhookId: i % 3 === 0 ? "wh_other" : "wh_hook" });
        await store.putDeadLetter(stored);
        if (destinationOf(stored) === "wh_hook") mine.push(stored);
      }
      const sorted = newestFirst(mine);
      for (const query of pageQueries(sorted, "dlv_")) {
        expect(await store.listDeadLetters("wh_hook", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sorted, byId, query),
        );
      }
      expect(await store.listDeadLetters("wh_nobody", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
    });

    it("deletes one dead letter, answering true once and false when it is gone", async () => {
      const store = await makeStore();
      const gone = deadLetter();
      const kept = deadLetter();
      await store.putDeadLetter(gone);
      await store.putDeadLetter(kept);
      expect(await store.deleteDeadLetter("wh_other", gone.id)).toBe(false);
      expect(await store.deleteDeadLetter(destinationOf(gone), gone.id)).toBe(true);
      expect(await store.deleteDeadLetter(destinationOf(gone), gone.id)).toBe(false);
      expect(await store.getDeadLetter(destinationOf(gone), gone.id)).toBeUndefined();
      expect(await store.listDeadLetters(destinationOf(gone), { limit: 10 })).toStrictEqual({
        items: [kept],
        totalCount: 1,
      });
    });

    it("lets exactly one of concurrent deletes of the same dead letter (two replays) answer true", async () => {
      const store = await makeStore();
      const stored = deadLetter();
      await store.putDeadLetter(stored);
      const results = await Promise.all(
        [1, 2, 3, 4].map(() => store.deleteDeadLetter(destinationOf(stored), stored.id)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it("deletes every dead letter of a webhook, however many, and keeps the other webhooks'", async () => {
      const store = await makeStore();
      // More than one BatchWriteItem's worth (25).
      for (let i = 0; i < 60; i++) await store.putDeadLetter(deadLetter({ webhookId: "wh_doomed" }));
      const kept = deadLetter({ webhookId: "wh_kept" });
      await store.putDeadLetter(kept);

      await store.deleteDeadLettersOf("wh_doomed");
      expect(await store.listDeadLetters("wh_doomed", { limit: 100 })).toStrictEqual({ items: [], totalCount: 0 });
      expect(await store.listDeadLetters("wh_kept", { limit: 100 })).toStrictEqual({ items: [kept], totalCount: 1 });
      await expect(store.deleteDeadLettersOf("wh_doomed")).resolves.toBeUndefined();
    });
  });
}
