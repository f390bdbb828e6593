import { describe, expect, it } from "vitest";
import { formatId, type ResourceKind } from "#core/ids";
import { type PageQuery, slicePage } from "#core/pagination";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import type { AutoSubscriptionRecord, SubscriptionRecord, WebhookRecord } from "#core/subscription-model";

let sequence = 0;
/** Distinct ids that sort by creation, without randomness (the dead-letter contract uses them too). */
export function nextId(kind: ResourceKind): string {
  sequence += 1;
  const random = new Uint8Array(12).map((_, i) => (sequence >> (i % 4)) + i);
  return formatId(kind, 1_790_000_000_000 + sequence, random);
}

function webhook(overrides: Partial<WebhookRecord> = {}): WebhookRecord {
  return {
    id: nextId("webhook"),
    userId: "u_ada",
    workspaceId: "o_ada",
    url: "https://hooks.example.com:8443/in?x=1",
    name: "Receiver é✓",
    description: "",
    sealedSigningSecret: "sealed:ciphertext==",
    createdAt: 1_790_000_000_000,
    updatedAt: 1_790_000_000_001,
    ...overrides,
  };
}

const SOURCE = "dc_source";

function subscription(overrides: Partial<SubscriptionRecord> = {}): SubscriptionRecord {
  return {
    id: nextId("subscription"),
    userId: "u_ada",
    workspaceId: "o_ada",
    emitterId: SOURCE,
    emitterKind: "source",
    emitterKey: SOURCE,
    listenerId: "wh_listener",
    listenerKind: "webhook",
    eventName: "",
    createdAt: 1_790_000_000_000 + sequence,
    ...overrides,
  };
}

function auto(overrides: Partial<AutoSubscriptionRecord> = {}): AutoSubscriptionRecord {
  return {
    id: nextId("subscription"),
    userId: "u_ada",
    workspaceId: "o_ada",
    eventName: "$errors",
    listenerId: "wh_listener",
    listenerKind: "webhook",
    createdAt: 1_790_000_000_000 + sequence,
    ...overrides,
  };
}

export const byId = (item: { id: string }) => item.id;
export const newestFirst = <T extends { id: string }>(items: T[]) =>
  [...items].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
const oldestFirst = <T extends { id: string }>(items: T[]) => newestFirst(items).reverse();

/** Every query the pagination tests compare with `slicePage`: ids and positions between them. */
export function pageQueries(sorted: { id: string }[], prefix: string): PageQuery[] {
  const cursors = [...sorted.map(byId), prefix, `${prefix}zzzzzzzzzzzzzzzzzzzzzz`, `${sorted[4]!.id.slice(0, -1)}0`];
  return [
    { limit: 10 },
    { limit: 100 },
    { limit: 1 },
    ...cursors.flatMap((cursor) => [
      { limit: 5, after: cursor },
      { limit: 5, before: cursor },
    ]),
  ];
}

const keyOf = (s: SubscriptionRecord) => ({
  emitterKey: s.emitterKey,
  listenerId: s.listenerId,
  eventName: s.eventName,
});

/** Behaviour every `SubscriptionStore` adapter must have. `makeStore` returns an empty store. */
export function subscriptionStoreContract(makeStore: () => Promise<SubscriptionStore>) {
  describe("SubscriptionStore: webhooks", () => {
    it("reads back a created webhook exactly as written, by id and in its user's list", async () => {
      const store = await makeStore();
      const created = webhook();
      await store.createWebhook(created);
      expect(await store.getWebhook(created.id)).toStrictEqual(created);
      expect(await store.listWebhooksOfUser("u_ada", { limit: 10 })).toStrictEqual({ items: [created], totalCount: 1 });
      expect(await store.getWebhook(nextId("webhook"))).toBeUndefined();
      expect(await store.listWebhooksOfUser("u_bob", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
    });

    it("refuses a second webhook with the same id and keeps the first", async () => {
      const store = await makeStore();
      const created = webhook();
      await store.createWebhook(created);
      await expect(store.createWebhook({ ...created, url: "https://other.example.com/" })).rejects.toMatchObject({
        code: "conflict",
      });
      expect(await store.getWebhook(created.id)).toStrictEqual(created);
    });

    it("replaces a webhook on update (secret rotation) everywhere it is read", async () => {
      const store = await makeStore();
      const created = webhook();
      await store.createWebhook(created);
      const rotated = { ...created, sealedSigningSecret: "sealed:rotated==", updatedAt: created.updatedAt + 10 };
      await store.updateWebhook(rotated);
      expect(await store.getWebhook(created.id)).toStrictEqual(rotated);
      expect((await store.listWebhooksOfUser("u_ada", { limit: 10 })).items).toStrictEqual([rotated]);
    });

    it("moves a webhook to its new owner's list when the owner changes", async () => {
      const store = await makeStore();
      const created = webhook();
      await store.createWebhook(created);
      const moved = { ...created, userId: "u_bob" };
      await store.updateWebhook(moved);
      expect(await store.listWebhooksOfUser("u_ada", { limit: 10 })).toStrictEqual({ items: [], totalCount: 0 });
      expect(await store.listWebhooksOfUser("u_bob", { limit: 10 })).toStrictEqual({ items: [moved], totalCount: 1 });
    });

    it("answers not_found when updating a webhook that does not exist, and creates nothing", async () => {
      const store = await makeStore();
      const missing = webhook();
      await expect(store.updateWebhook(missing)).rejects.toMatchObject({ code: "not_found" });
      expect(await store.getWebhook(missing.id)).toBeUndefined();
      expect((await store.listWebhooksOfUser("u_ada", { limit: 10 })).totalCount).toBe(0);

      await store.createWebhook(missing);
      await store.deleteWebhook(missing.id);
      await expect(store.updateWebhook(missing)).rejects.toMatchObject({ code: "not_found" });
    });

    it("deletes a webhook from every read, and deleting again or an unknown id succeeds", async () => {
      const store = await makeStore();
      const gone = webhook();
      const kept = webhook();
      await store.createWebhook(gone);
      await store.createWebhook(kept);
      await store.deleteWebhook(gone.id);
      expect(await store.getWebhook(gone.id)).toBeUndefined();
      expect(await store.listWebhooksOfUser("u_ada", { limit: 10 })).toStrictEqual({ items: [kept], totalCount: 1 });
      await expect(store.deleteWebhook(gone.id)).resolves.toBeUndefined();
      await expect(store.deleteWebhook(nextId("webhook"))).resolves.toBeUndefined();
      expect(await store.getWebhook(kept.id)).toStrictEqual(kept);
    });

    it("pages a user's webhooks newest first exactly like slicePage", async () => {
      const store = await makeStore();
      const mine: WebhookRecord[] = [];
      for (let i = 0; i < 17; i++) {
        const created = webhook({ userId: i % 4 === 0 ? "u_bob" : "u_ada" });
        await store.createWebhook(created);
        if (created.userId === "u_ada") mine.push(created);
      }
      const sorted = newestFirst(mine);
      for (const query of pageQueries(sorted, "wh_")) {
        expect(await store.listWebhooksOfUser("u_ada", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sorted, byId, query),
        );
      }
    });
  });

  describe("SubscriptionStore: subscriptions", () => {
    it("stores a subscription and reads it back exactly by key and in its user's and workspace's lists", async () => {
      const store = await makeStore();
      const created = subscription({
        emitterId: "dc_*",
        emitterKind: "sources-glob",
        emitterKey: "dc_*:u_ada",
        listenerId: "p_workflow",
        listenerKind: "workflow",
        eventName: "custom channel",
      });
      expect(await store.putSubscription(created)).toStrictEqual(created);
      expect(await store.getSubscription(keyOf(created))).toStrictEqual(created);
      expect(await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).toStrictEqual({
        items: [created],
        totalCount: 1,
      });
      expect(await store.listSubscriptionsOfWorkspace("o_ada", { limit: 10 })).toStrictEqual({
        items: [created],
        totalCount: 1,
      });
      expect(await store.findSubscriptions(["dc_*:u_ada"], "custom channel")).toStrictEqual([created]);
      expect(await store.getSubscription({ ...keyOf(created), eventName: "" })).toBeUndefined();
    });

    it("returns the first subscription when the same one is put again, and stores no duplicate", async () => {
      const store = await makeStore();
      const first = subscription();
      await store.putSubscription(first);
      const again = subscription({ createdAt: first.createdAt + 1000, userId: "u_ada", workspaceId: "o_ada" });
      expect(again.id).not.toBe(first.id);
      expect(await store.putSubscription(again)).toStrictEqual(first);
      expect(await store.putSubscription(first)).toStrictEqual(first);
      expect(await store.getSubscription(keyOf(first))).toStrictEqual(first);
      expect(await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).toStrictEqual({
        items: [first],
        totalCount: 1,
      });
      expect(await store.findSubscriptions([SOURCE], "")).toStrictEqual([first]);
    });

    it("stores exactly one of concurrent puts of the same subscription and returns it to every caller", async () => {
      const store = await makeStore();
      const racers = Array.from({ length: 6 }, () => subscription({ eventName: "race" }));
      const results = await Promise.all(racers.map((racer) => store.putSubscription(racer)));
      const winner = results[0]!;
      expect(racers.map(byId)).toContain(winner.id);
      for (const result of results) expect(result).toStrictEqual(winner);
      expect(await store.findSubscriptions([SOURCE], "race")).toStrictEqual([winner]);
      expect(await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).toStrictEqual({
        items: [winner],
        totalCount: 1,
      });
      expect(await store.listSubscriptionsOfWorkspace("o_ada", { limit: 10 })).toStrictEqual({
        items: [winner],
        totalCount: 1,
      });
    });

    it("refuses a subscription whose id is taken by another subscription", async () => {
      const store = await makeStore();
      const first = await store.putSubscription(subscription());
      await expect(store.putSubscription({ ...first, listenerId: "wh_other" })).rejects.toMatchObject({
        code: "conflict",
      });
      expect(await store.getSubscription({ ...keyOf(first), listenerId: "wh_other" })).toBeUndefined();
      expect((await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).totalCount).toBe(1);
    });

    it("keeps subscriptions apart by each part of the key, whatever characters the channel holds", async () => {
      const store = await makeStore();
      const names = ["", "a", "a#b", "a%23b", "a#", "#", "$errors", "$logs", "ünï cødé ✓"];
      const created: SubscriptionRecord[] = [];
      for (const eventName of names) created.push(await store.putSubscription(subscription({ eventName })));
      const otherListener = await store.putSubscription(subscription({ eventName: "a", listenerId: "dc_listener" }));
      const otherEmitter = await store.putSubscription(
        subscription({ eventName: "a", emitterId: "dc_other", emitterKey: "dc_other" }),
      );
      expect(new Set(created.map(byId)).size).toBe(names.length);
      for (const [index, eventName] of names.entries()) {
        const expected = eventName === "a" ? [created[index]!, otherListener] : [created[index]!];
        expect(newestFirst(await store.findSubscriptions([SOURCE], eventName)), eventName).toStrictEqual(
          newestFirst(expected),
        );
        expect(await store.getSubscription(keyOf(created[index]!))).toStrictEqual(created[index]);
      }
      expect(await store.findSubscriptions(["dc_other"], "a")).toStrictEqual([otherEmitter]);
      expect(await store.findSubscriptions([SOURCE], "b")).toStrictEqual([]);
    });

    it("finds, on the emit path, the subscriptions of every given emitter key to that channel and no other", async () => {
      const store = await makeStore();
      const exact = await store.putSubscription(subscription({ listenerId: "wh_one" }));
      const exactOther = await store.putSubscription(subscription({ listenerId: "dc_two", listenerKind: "source" }));
      const glob = await store.putSubscription(
        subscription({
          emitterId: "dc_*",
          emitterKind: "sources-glob",
          emitterKey: "dc_*:u_ada",
          listenerId: "wh_one",
        }),
      );
      const errors = await store.putSubscription(
        subscription({ emitterId: "o_ada", emitterKind: "workspace", emitterKey: "o_ada", eventName: "$errors" }),
      );
      const sourceErrors = await store.putSubscription(subscription({ eventName: "$errors", listenerId: "wh_one" }));
      // Same channel, other emitters: never returned for the keys below.
      await store.putSubscription(subscription({ emitterId: "dc_else", emitterKey: "dc_else" }));
      await store.putSubscription(
        subscription({ emitterId: "dc_*", emitterKind: "sources-glob", emitterKey: "dc_*:u_bob", userId: "u_bob" }),
      );
      const keys = [SOURCE, "dc_*:u_ada", "o_ada"];

      expect(newestFirst(await store.findSubscriptions(keys, ""))).toStrictEqual(
        newestFirst([exact, exactOther, glob]),
      );
      expect(newestFirst(await store.findSubscriptions(keys, "$errors"))).toStrictEqual(
        newestFirst([errors, sourceErrors]),
      );
      expect(await store.findSubscriptions(keys, "$logs")).toStrictEqual([]);
      expect(newestFirst(await store.findSubscriptions([...keys, SOURCE, "dc_*:u_ada"], ""))).toStrictEqual(
        newestFirst([exact, exactOther, glob]),
      );
      expect(await store.findSubscriptions(["dc_unknown"], "")).toStrictEqual([]);
      expect(await store.findSubscriptions([], "")).toStrictEqual([]);
    });

    it("deletes one subscription by key and returns it; deleting it again returns undefined", async () => {
      const store = await makeStore();
      const gone = await store.putSubscription(subscription({ eventName: "x" }));
      const kept = await store.putSubscription(subscription({ eventName: "x", listenerId: "wh_kept" }));
      expect(await store.deleteSubscription(keyOf(gone))).toStrictEqual(gone);
      expect(await store.getSubscription(keyOf(gone))).toBeUndefined();
      expect(await store.findSubscriptions([SOURCE], "x")).toStrictEqual([kept]);
      expect(await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).toStrictEqual({
        items: [kept],
        totalCount: 1,
      });
      expect(await store.listSubscriptionsOfWorkspace("o_ada", { limit: 10 })).toStrictEqual({
        items: [kept],
        totalCount: 1,
      });
      expect(await store.deleteSubscription(keyOf(gone))).toBeUndefined();
      expect(await store.deleteSubscription({ ...keyOf(gone), eventName: "never" })).toBeUndefined();

      // The key is free again: a new put stores the new record.
      const renewed = subscription({ eventName: "x" });
      expect(await store.putSubscription(renewed)).toStrictEqual(renewed);
      expect(newestFirst(await store.findSubscriptions([SOURCE], "x"))).toStrictEqual(newestFirst([kept, renewed]));
    });

    it("lets exactly one of concurrent deletes of the same subscription return it", async () => {
      const store = await makeStore();
      const created = await store.putSubscription(subscription({ eventName: "d" }));
      const results = await Promise.all([1, 2, 3].map(() => store.deleteSubscription(keyOf(created))));
      expect(results.filter((result) => result !== undefined)).toStrictEqual([created]);
      expect(await store.findSubscriptions([SOURCE], "d")).toStrictEqual([]);
      expect((await store.listSubscriptionsOfUser("u_ada", { limit: 10 })).totalCount).toBe(0);
    });

    it("pages a user's and a workspace's subscriptions newest first exactly like slicePage", async () => {
      const store = await makeStore();
      const mine: SubscriptionRecord[] = [];
      const workspace: SubscriptionRecord[] = [];
      for (let i = 0; i < 23; i++) {
        const userId = i % 3 === 0 ? "u_bob" : "u_ada";
        const workspaceId = i % 2 === 0 ? "o_shared" : "o_other";
        const saved = await store.putSubscription(subscription({ userId, workspaceId, listenerId: `wh_${i}` }));
        if (userId === "u_ada") mine.push(saved);
        if (workspaceId === "o_shared") workspace.push(saved);
      }
      const sortedMine = newestFirst(mine);
      const sortedWorkspace = newestFirst(workspace);
      for (const query of pageQueries(sortedMine, "sub_")) {
        expect(await store.listSubscriptionsOfUser("u_ada", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sortedMine, byId, query),
        );
      }
      for (const query of pageQueries(sortedWorkspace, "sub_")) {
        expect(await store.listSubscriptionsOfWorkspace("o_shared", query), JSON.stringify(query)).toStrictEqual(
          slicePage(sortedWorkspace, byId, query),
        );
      }
      expect(await store.listSubscriptionsOfWorkspace("o_nobody", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
    });

    it("removes every subscription whose emitter or listener is a deleted resource, and only those", async () => {
      const store = await makeStore();
      const doomed = "dc_doomed";
      const asEmitter = [
        await store.putSubscription(subscription({ emitterId: doomed, emitterKey: doomed, listenerId: "wh_a" })),
        await store.putSubscription(
          subscription({ emitterId: doomed, emitterKey: doomed, listenerId: "wh_b", eventName: "$logs" }),
        ),
      ];
      const asListener = [
        await store.putSubscription(subscription({ listenerId: doomed, listenerKind: "source" })),
        await store.putSubscription(
          subscription({
            emitterId: "dc_*",
            emitterKind: "sources-glob",
            emitterKey: "dc_*:u_ada",
            listenerId: doomed,
            listenerKind: "source",
          }),
        ),
      ];
      // Its own channel: emitter and listener at once.
      const loop = await store.putSubscription(
        subscription({ emitterId: doomed, emitterKey: doomed, listenerId: doomed, listenerKind: "source" }),
      );
      const kept = [
        await store.putSubscription(subscription({ listenerId: "wh_a" })),
        await store.putSubscription(
          subscription({
            emitterId: "dc_*",
            emitterKind: "sources-glob",
            emitterKey: "dc_*:u_ada",
            listenerId: "wh_a",
          }),
        ),
        await store.putSubscription(subscription({ emitterId: "dc_doomed2", emitterKey: "dc_doomed2" })),
      ];

      await store.deleteSubscriptionsOf(doomed);
      for (const gone of [...asEmitter, ...asListener, loop]) {
        expect(await store.getSubscription(keyOf(gone))).toBeUndefined();
      }
      expect(await store.findSubscriptions([doomed], "")).toStrictEqual([]);
      expect(await store.findSubscriptions([doomed], "$logs")).toStrictEqual([]);
      expect(newestFirst(await store.findSubscriptions([SOURCE, "dc_*:u_ada", "dc_doomed2"], ""))).toStrictEqual(
        newestFirst(kept),
      );
      expect(await store.listSubscriptionsOfUser("u_ada", { limit: 100 })).toStrictEqual({
        items: newestFirst(kept),
        totalCount: kept.length,
      });
      expect(await store.listSubscriptionsOfWorkspace("o_ada", { limit: 100 })).toStrictEqual({
        items: newestFirst(kept),
        totalCount: kept.length,
      });
      await expect(store.deleteSubscriptionsOf(doomed)).resolves.toBeUndefined();
      await expect(store.deleteSubscriptionsOf("wh_nothing")).resolves.toBeUndefined();
    });
  });

  describe("SubscriptionStore: auto subscriptions", () => {
    it("stores auto subscriptions once per (user, channel, listener) and lists a user's oldest first", async () => {
      const store = await makeStore();
      const errors = auto();
      expect(await store.putAutoSubscription(errors)).toStrictEqual(errors);
      expect(await store.putAutoSubscription(auto())).toStrictEqual(errors);
      const logs = await store.putAutoSubscription(auto({ eventName: "$logs" }));
      const otherListener = await store.putAutoSubscription(auto({ listenerId: "p_flow", listenerKind: "workflow" }));
      const bobs = await store.putAutoSubscription(auto({ userId: "u_bob", workspaceId: "o_bob" }));
      const hashed = await store.putAutoSubscription(auto({ eventName: "$errors#x" }));

      expect(await store.listAutoSubscriptionsOfUser("u_ada")).toStrictEqual(
        oldestFirst([errors, logs, otherListener, hashed]),
      );
      expect(await store.listAutoSubscriptionsOfUser("u_bob")).toStrictEqual([bobs]);
      expect(await store.listAutoSubscriptionsOfUser("u_nobody")).toStrictEqual([]);
    });

    it("stores exactly one of concurrent puts of the same auto subscription and returns it to every caller", async () => {
      const store = await makeStore();
      const racers = Array.from({ length: 6 }, () => auto({ eventName: "$logs" }));
      const results = await Promise.all(racers.map((racer) => store.putAutoSubscription(racer)));
      const winner = results[0]!;
      expect(racers.map(byId)).toContain(winner.id);
      for (const result of results) expect(result).toStrictEqual(winner);
      expect(await store.listAutoSubscriptionsOfUser("u_ada")).toStrictEqual([winner]);
    });

    it("removes the auto subscriptions of a deleted listener, and only those", async () => {
      const store = await makeStore();
      await store.putAutoSubscription(auto({ listenerId: "wh_doomed" }));
      await store.putAutoSubscription(auto({ listenerId: "wh_doomed", eventName: "$logs" }));
      await store.putAutoSubscription(auto({ listenerId: "wh_doomed", userId: "u_bob" }));
      const kept = await store.putAutoSubscription(auto({ listenerId: "wh_kept" }));
      const bobsKept = await store.putAutoSubscription(auto({ listenerId: "wh_kept", userId: "u_bob" }));

      await store.deleteAutoSubscriptionsOf("wh_doomed");
      expect(await store.listAutoSubscriptionsOfUser("u_ada")).toStrictEqual([kept]);
      expect(await store.listAutoSubscriptionsOfUser("u_bob")).toStrictEqual([bobsKept]);
      await expect(store.deleteAutoSubscriptionsOf("wh_doomed")).resolves.toBeUndefined();

      // The key is free again.
      const renewed = auto({ listenerId: "wh_doomed" });
      expect(await store.putAutoSubscription(renewed)).toStrictEqual(renewed);
    });
  });
}
