import { describe, expect, it } from "vitest";
import { SqliteAppAccountStore } from "#adapters/local/sqlite-app-account-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import type { AppAccountRecord } from "#core/ports/app-account-store";

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

describe("SqliteAppAccountStore", () => {
  it("stores, pages by workspace and app, updates only at the expected version, and deletes", async () => {
    const store = new SqliteAppAccountStore(openSqlite(":memory:"));
    await store.create(account("apn_1", { expiresAt: 50, lastError: "x", healthy: false }));
    await store.create(account("apn_2", { app: "other" }));
    await store.create(account("apn_3"));
    await store.create(account("apn_4", { workspaceId: "o_2" }));
    expect(await store.get("apn_1")).toEqual(account("apn_1", { expiresAt: 50, lastError: "x", healthy: false }));
    const first = await store.list("o_1", { limit: 2 });
    expect(first.accounts.map((a) => a.id)).toEqual(["apn_1", "apn_2"]);
    expect(first.nextAfter).toBe("apn_2");
    expect(await store.list("o_1", { limit: 2, after: "apn_2" })).toEqual({ accounts: [account("apn_3")] });
    expect((await store.list("o_1", { app: "acme", limit: 10 })).accounts.map((a) => a.id)).toEqual(["apn_1", "apn_3"]);

    expect(await store.update(account("apn_3", { name: "renamed", version: 2 }), 1)).toBe(true);
    expect(await store.update(account("apn_3", { name: "late", version: 2 }), 1)).toBe(false);
    expect(await store.get("apn_3")).toMatchObject({ name: "renamed", version: 2 });
    expect(await store.delete("apn_3")).toBe(true);
    expect(await store.delete("apn_3")).toBe(false);
    expect(await store.update(account("apn_3", { version: 3 }), 2)).toBe(false);
  });

  it("gives an OAuth state once, and never after it expired", async () => {
    const store = new SqliteAppAccountStore(openSqlite(":memory:"));
    const pending = {
      state: "s1",
      workspaceId: "o_1",
      ownerId: "u_1",
      app: "acme",
      sealedVerifier: "v",
      redirectUri: "http://127.0.0.1/cb",
      expiresAt: 100,
    };
    await store.savePendingConnect(pending, 0);
    await store.savePendingConnect({ ...pending, state: "s2", name: "mine" }, 0);
    expect(await store.takePendingConnect("s1", 99)).toEqual(pending);
    expect(await store.takePendingConnect("s1", 99)).toBeUndefined();
    expect(await store.takePendingConnect("s2", 100)).toBeUndefined();
  });
});
