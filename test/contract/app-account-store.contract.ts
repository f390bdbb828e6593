import { describe, expect, it } from "vitest";
import type { AppAccountRecord, AppAccountStore, PendingConnect } from "#core/ports/app-account-store";

const account = (id: string, overrides: Partial<AppAccountRecord> = {}): AppAccountRecord => ({
  id,
  workspaceId: "o_1",
  ownerId: "u_1",
  app: "acme",
  name: `account ${id}`,
  sealedCredentials: "sealed",
  healthy: true,
  createdAt: 1,
  updatedAt: 1,
  version: 1,
  ...overrides,
});

const pending: PendingConnect = {
  state: "s1",
  workspaceId: "o_1",
  ownerId: "u_1",
  app: "acme",
  sealedVerifier: "v",
  redirectUri: "http://127.0.0.1/cb",
  expiresAt: 100_000,
};

/** The behaviour every `AppAccountStore` adapter has; `make` gives an empty store each time. */
export function appAccountStoreContract(make: () => Promise<AppAccountStore>) {
  describe("AppAccountStore contract", () => {
    it("stores an account as given, optional fields included, and refuses an id twice", async () => {
      const store = await make();
      const full = account("apn_1", { expiresAt: 50, lastError: "refused", healthy: false });
      await store.create(full);
      await store.create(account("apn_2"));
      expect(await store.get("apn_1")).toEqual(full);
      expect(await store.get("apn_2")).toEqual(account("apn_2"));
      expect(await store.get("apn_missing")).toBeUndefined();
      await expect(store.create(account("apn_1", { name: "again" }))).rejects.toThrow();
      expect(await store.get("apn_1")).toEqual(full);
    });

    it("lists the healthy accounts of every workspace whose token expires before a time, soonest first", async () => {
      const store = await make();
      await store.create(account("apn_1", { expiresAt: 300 }));
      await store.create(account("apn_2", { expiresAt: 100, workspaceId: "o_2" }));
      await store.create(account("apn_3"));
      await store.create(account("apn_4", { expiresAt: 200, healthy: false, lastError: "refused" }));
      await store.create(account("apn_5", { expiresAt: 250 }));
      expect((await store.listExpiring(301, 10)).map((a) => a.id)).toEqual(["apn_2", "apn_5", "apn_1"]);
      expect(await store.listExpiring(251, 1)).toEqual([account("apn_2", { expiresAt: 100, workspaceId: "o_2" })]);
      expect(await store.listExpiring(100, 10)).toEqual([]);
      // A refresh moves the expiry; a deletion takes the account out.
      const moved = account("apn_2", { expiresAt: 1_000, workspaceId: "o_2", version: 2 });
      expect(await store.update(moved, 1)).toBe(true);
      expect(await store.delete("apn_1")).toBe(true);
      expect((await store.listExpiring(950, 10)).map((a) => a.id)).toEqual(["apn_5"]);
      expect((await store.listExpiring(2_000, 10)).map((a) => a.id)).toEqual(["apn_5", "apn_2"]);
      // Marked unhealthy it leaves the list, healthy again it is back; an expiry removed (a token
      // that no longer expires) takes it out too.
      const refused = account("apn_5", { expiresAt: 250, healthy: false, lastError: "refused", version: 2 });
      expect(await store.update(refused, 1)).toBe(true);
      expect((await store.listExpiring(2_000, 10)).map((a) => a.id)).toEqual(["apn_2"]);
      expect(await store.update(account("apn_4", { expiresAt: 200, version: 2 }), 1)).toBe(true);
      expect((await store.listExpiring(2_000, 10)).map((a) => a.id)).toEqual(["apn_4", "apn_2"]);
      const { expiresAt: _gone, ...forever } = account("apn_2", { workspaceId: "o_2", version: 3 });
      expect(await store.update(forever, 2)).toBe(true);
      expect((await store.listExpiring(2_000, 10)).map((a) => a.id)).toEqual(["apn_4"]);
    });

    it("pages a workspace's accounts by id, of one app when asked, and counts them", async () => {
      const store = await make();
      await store.create(account("apn_3"));
      await store.create(account("apn_1"));
      await store.create(account("apn_2", { app: "other" }));
      await store.create(account("apn_4", { workspaceId: "o_2" }));
      const first = await store.list("o_1", { limit: 2 });
      expect(first.accounts.map((a) => a.id)).toEqual(["apn_1", "apn_2"]);
      expect(first.nextAfter).toBe("apn_2");
      expect(await store.list("o_1", { limit: 2, after: "apn_2" })).toEqual({ accounts: [account("apn_3")] });
      expect(await store.list("o_1", { limit: 3 })).toEqual({
        accounts: [account("apn_1"), account("apn_2", { app: "other" }), account("apn_3")],
      });
      const ofApp = await store.list("o_1", { app: "acme", limit: 1 });
      expect(ofApp).toEqual({ accounts: [account("apn_1")], nextAfter: "apn_1" });
      expect(await store.list("o_1", { app: "acme", limit: 1, after: "apn_1" })).toEqual({
        accounts: [account("apn_3")],
      });
      expect(await store.list("o_9", { limit: 5 })).toEqual({ accounts: [] });
      expect(await store.count("o_1")).toBe(3);
      expect(await store.count("o_1", "acme")).toBe(2);
      expect(await store.count("o_2", "acme")).toBe(1);
      expect(await store.count("o_9")).toBe(0);
    });

    it("updates only at the expected version, and the workspace's list shows the update", async () => {
      const store = await make();
      await store.create(account("apn_1"));
      const renamed = account("apn_1", { name: "renamed", version: 2, expiresAt: 9, updatedAt: 5 });
      expect(await store.update(renamed, 1)).toBe(true);
      expect(await store.update(account("apn_1", { name: "late", version: 2 }), 1)).toBe(false);
      expect(await store.get("apn_1")).toEqual(renamed);
      expect((await store.list("o_1", { limit: 5 })).accounts).toEqual([renamed]);
      // Optional fields that go away are removed.
      const cleared = account("apn_1", { name: "renamed", version: 3, updatedAt: 6 });
      expect(await store.update(cleared, 2)).toBe(true);
      expect(await store.get("apn_1")).toEqual(cleared);
      expect(await store.update(account("apn_missing", { version: 2 }), 1)).toBe(false);
      expect(await store.get("apn_missing")).toBeUndefined();
    });

    it("deletes an account from its id and from its workspace's list, once", async () => {
      const store = await make();
      await store.create(account("apn_1"));
      await store.create(account("apn_2"));
      expect(await store.delete("apn_1")).toBe(true);
      expect(await store.delete("apn_1")).toBe(false);
      expect(await store.get("apn_1")).toBeUndefined();
      expect((await store.list("o_1", { limit: 5 })).accounts.map((a) => a.id)).toEqual(["apn_2"]);
      expect(await store.count("o_1")).toBe(1);
      expect(await store.update(account("apn_1", { version: 2 }), 1)).toBe(false);
      expect(await store.get("apn_1")).toBeUndefined();
    });

    it("gives an OAuth state once, with its optional name, and never after it expired", async () => {
      const store = await make();
      await store.savePendingConnect(pending, 0);
      await store.savePendingConnect({ ...pending, state: "s2", name: "mine" }, 0);
      await store.savePendingConnect({ ...pending, state: "s3" }, 0);
      expect(await store.takePendingConnect("s2", 99_999)).toEqual({ ...pending, state: "s2", name: "mine" });
      expect(await store.takePendingConnect("s2", 99_999)).toBeUndefined();
      expect(await store.takePendingConnect("s1", 100_000)).toBeUndefined();
      // An expired state is gone too, not taken later with an earlier clock.
      expect(await store.takePendingConnect("s1", 0)).toBeUndefined();
      expect(await store.takePendingConnect("missing", 0)).toBeUndefined();
      const [a, b] = await Promise.all([store.takePendingConnect("s3", 1), store.takePendingConnect("s3", 1)]);
      expect([a, b].filter((taken) => taken !== undefined)).toEqual([{ ...pending, state: "s3" }]);
    });
  });
}
