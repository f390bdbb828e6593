import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteSubscriptionStore } from "#adapters/local/sqlite-subscription-store";
import type { SubscriptionRecord, WebhookRecord } from "#core/subscription-model";

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

function subscription(id: string, overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id,
    userId: "u_ada",
    workspaceId: "o_ada",
    emitterId: "dc_a",
    emitterKind: "source",
    emitterKey: "dc_a",
    listenerId: "wh_a",
    listenerKind: "webhook",
    eventName: "",
    createdAt: 1_790_000_000_000,
    ...overrides,
  };
}

const webhook: WebhookRecord = {
  id: "wh_a",
  userId: "u_ada",
  workspaceId: "o_ada",
  url: "https://example.com/hook",
  name: "hook",
  description: "",
  sealedSigningSecret: "sealed",
  createdAt: 1_790_000_000_000,
  updatedAt: 1_790_000_000_000,
};

const ids = (found: SubscriptionRecord[]) => found.map((s) => s.id).sort();

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("SqliteSubscriptionStore's cache of findSubscriptions", () => {
  it("never answers from the cache what this store changed since: put, delete, cascading deletes", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"));
    const keys = ["dc_a", "o_ada:dc_a"];
    expect(await store.findSubscriptions(keys, "")).toEqual([]);
    expect(await store.findSubscriptions(keys, "")).toEqual([]);

    await store.putSubscription(subscription("sub_1"));
    expect(ids(await store.findSubscriptions(keys, ""))).toEqual(["sub_1"]);

    await store.deleteSubscription({ emitterKey: "dc_a", eventName: "", listenerId: "wh_a" });
    expect(await store.findSubscriptions(keys, "")).toEqual([]);

    await store.createWebhook(webhook);
    await store.putSubscription(subscription("sub_2"));
    await store.putSubscription(subscription("sub_3", { emitterKey: "o_ada:dc_a", listenerId: "p_b" }));
    expect(ids(await store.findSubscriptions(keys, ""))).toEqual(["sub_2", "sub_3"]);
    // Deleting the webhook's subscriptions (as deleteWebhook does) is seen at once.
    await store.deleteSubscriptionsOf("wh_a");
    expect(ids(await store.findSubscriptions(keys, ""))).toEqual(["sub_3"]);
    // So is deleting an emitter's.
    await store.deleteSubscriptionsOf("o_ada:dc_a");
    expect(await store.findSubscriptions(keys, "")).toEqual([]);
  });

  it("keys results by every emitter key and the event name", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"));
    await store.putSubscription(subscription("sub_1", { eventName: "created" }));
    expect(ids(await store.findSubscriptions(["dc_a"], "created"))).toEqual(["sub_1"]);
    expect(await store.findSubscriptions(["dc_a"], "")).toEqual([]);
    expect(await store.findSubscriptions(["dc_b"], "created")).toEqual([]);
    expect(ids(await store.findSubscriptions(["dc_b", "dc_a"], "created"))).toEqual(["sub_1"]);
    expect(await store.findSubscriptions([], "created")).toEqual([]);
  });

  it("hands out copies: changing a returned result does not change what the next call returns", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"));
    await store.putSubscription(subscription("sub_1"));
    const first = await store.findSubscriptions(["dc_a"], "");
    expect(ids(first)).toEqual(["sub_1"]);
    (first[0] as SubscriptionRecord).listenerId = "changed";
    first.push(subscription("sub_forged"));
    const empty = await store.findSubscriptions(["dc_none"], "");
    empty.push(subscription("sub_forged"));

    expect(await store.findSubscriptions(["dc_a"], "")).toEqual([subscription("sub_1")]);
    expect(await store.findSubscriptions(["dc_none"], "")).toEqual([]);
  });

  it("sees a write made by another connection to the file from the next turn of the event loop", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-subscription-cache-"));
    dirs.push(dir);
    const mine = new SqliteSubscriptionStore(openSqlite(join(dir, "sluice.db")));
    const other = new SqliteSubscriptionStore(openSqlite(join(dir, "sluice.db")));
    expect(await mine.findSubscriptions(["dc_a"], "")).toEqual([]);

    await other.putSubscription(subscription("sub_1"));
    await nextTurn();
    expect(ids(await mine.findSubscriptions(["dc_a"], ""))).toEqual(["sub_1"]);

    await other.deleteSubscriptionsOf("dc_a");
    await nextTurn();
    expect(await mine.findSubscriptions(["dc_a"], "")).toEqual([]);
  });

  it("stays bounded: past cacheSize results it starts over, and every call still answers", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"), { cacheSize: 3 });
    for (let i = 0; i < 10; i += 2) {
      await store.putSubscription(subscription(`sub_${i}`, { emitterKey: `dc_${i}` }));
    }
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 10; i++) {
        expect(ids(await store.findSubscriptions([`dc_${i}`], ""))).toEqual(i % 2 === 0 ? [`sub_${i}`] : []);
      }
    }
  });

  it("works with the cache disabled", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"), { cacheSize: 0 });
    expect(await store.findSubscriptions(["dc_a"], "")).toEqual([]);
    await store.putSubscription(subscription("sub_1"));
    expect(ids(await store.findSubscriptions(["dc_a"], ""))).toEqual(["sub_1"]);
  });
});

describe("SqliteSubscriptionStore's cache of getWebhook (read by every delivery attempt)", () => {
  it("answers from memory within a turn, and sees another connection's write from the next turn", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-webhook-cache-"));
    dirs.push(dir);
    const mine = new SqliteSubscriptionStore(openSqlite(join(dir, "sluice.db")));
    const other = new SqliteSubscriptionStore(openSqlite(join(dir, "sluice.db")));
    await other.createWebhook(webhook);
    await nextTurn();
    expect((await mine.getWebhook("wh_a"))?.url).toBe(webhook.url);

    // Within the turn the row is not read again: the cache answers (what the delivery worker relies on).
    await other.updateWebhook({ ...webhook, url: "https://example.com/moved" });
    expect((await mine.getWebhook("wh_a"))?.url).toBe(webhook.url);
    await nextTurn();
    expect((await mine.getWebhook("wh_a"))?.url).toBe("https://example.com/moved");

    await other.deleteWebhook("wh_a");
    await nextTurn();
    expect(await mine.getWebhook("wh_a")).toBeUndefined();
  });

  it("never answers from the cache what this store changed: create, rotate, delete", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"));
    expect(await store.getWebhook("wh_a")).toBeUndefined();
    await store.createWebhook(webhook);
    expect(await store.getWebhook("wh_a")).toEqual(webhook);
    await store.updateWebhook({ ...webhook, sealedSigningSecret: "rotated" });
    expect((await store.getWebhook("wh_a"))?.sealedSigningSecret).toBe("rotated");
    await store.deleteWebhook("wh_a");
    expect(await store.getWebhook("wh_a")).toBeUndefined();
  });

  it("hands out copies: changing a returned webhook does not change the next one", async () => {
    const store = new SqliteSubscriptionStore(openSqlite(":memory:"));
    await store.createWebhook(webhook);
    const first = (await store.getWebhook("wh_a")) as WebhookRecord;
    first.url = "https://attacker.example/";
    expect(await store.getWebhook("wh_a")).toEqual(webhook);
  });
});
