import { describe, expect, it } from "vitest";
import { hashApiKey } from "#core/api-keys";
import type { NewAccount } from "#core/identity";
import { formatId, type ResourceKind } from "#core/ids";
import type { IdentityStore } from "#core/ports/identity-store";

let sequence = 0;
/** Distinct, time-ordered ids without randomness, so failures are reproducible. */
function nextId(kind: ResourceKind): string {
  sequence += 1;
  const random = new Uint8Array(12).map((_, i) => (sequence >> (i % 4)) + i);
  return formatId(kind, 1_790_000_000_000 + sequence, random);
}

export function newAccount(username: string, key = `key-of-${username}-0123456789`): NewAccount {
  const now = 1_790_000_000_000 + sequence;
  const userId = nextId("user");
  const workspaceId = nextId("workspace");
  return {
    user: { id: userId, username, email: `${username}@example.com`, createdAt: now, updatedAt: now },
    workspace: {
      id: workspaceId,
      orgname: username,
      name: `${username}'s workspace`,
      email: `${username}@example.com`,
      createdAt: now,
      updatedAt: now,
    },
    membership: { workspaceId, userId, role: "owner", createdAt: now },
    project: { id: nextId("project"), workspaceId, name: "Default project", createdAt: now, updatedAt: now + 1 },
    apiKey: { id: nextId("apiKey"), hash: hashApiKey(key), userId, label: "initial", createdAt: now },
  };
}

/** Behaviour every `IdentityStore` adapter must have. `makeStore` returns an empty store. */
export function identityStoreContract(makeStore: () => Promise<IdentityStore>) {
  describe("IdentityStore", () => {
    it("reads back every part of a created account exactly as written", async () => {
      const store = await makeStore();
      const account = newAccount("ada");
      const { workspace } = await store.createAccount(account);

      expect(workspace).toEqual({ ...account.workspace, number: workspace.number });
      expect(Number.isInteger(workspace.number) && workspace.number > 0).toBe(true);
      expect(await store.getUser(account.user.id)).toEqual(account.user);
      expect(await store.findUserByUsername("ada")).toEqual(account.user);
      expect(await store.getWorkspace(account.workspace.id)).toEqual(workspace);
      expect(await store.getMembership(account.workspace.id, account.user.id)).toEqual(account.membership);
      expect(await store.listWorkspacesOfUser(account.user.id)).toEqual([workspace]);
      expect(await store.listProjects(account.workspace.id)).toEqual([account.project]);
      expect(await store.findApiKeyByHash(account.apiKey.hash)).toEqual(account.apiKey);
    });

    it("gives each new workspace a larger number than the one before", async () => {
      const store = await makeStore();
      const first = await store.createAccount(newAccount("first"));
      const second = await store.createAccount(newAccount("second"));
      expect(second.workspace.number).toBeGreaterThan(first.workspace.number);
    });

    it("refuses a taken username as a conflict and writes nothing of the second account", async () => {
      const store = await makeStore();
      await store.createAccount(newAccount("grace"));
      const duplicate = newAccount("grace", "another-key-for-grace-0123");

      await expect(store.createAccount(duplicate)).rejects.toMatchObject({ code: "conflict" });
      expect(await store.getUser(duplicate.user.id)).toBeUndefined();
      expect(await store.getWorkspace(duplicate.workspace.id)).toBeUndefined();
      expect(await store.listProjects(duplicate.workspace.id)).toEqual([]);
      expect(await store.findApiKeyByHash(duplicate.apiKey.hash)).toBeUndefined();
    });

    it("refuses an account whose API key is already in use as a conflict", async () => {
      const store = await makeStore();
      await store.createAccount(newAccount("owner", "shared-key-0123456789"));
      const second = newAccount("copycat", "shared-key-0123456789");
      await expect(store.createAccount(second)).rejects.toMatchObject({
        code: "conflict",
        message: expect.stringMatching(/key/),
      });
      expect(await store.getUser(second.user.id)).toBeUndefined();
    });

    it("adds further API keys and refuses the same key twice as a conflict", async () => {
      const store = await makeStore();
      const account = newAccount("linus");
      await store.createAccount(account);
      const extra = { ...account.apiKey, id: nextId("apiKey"), hash: hashApiKey("second-key-0123456789"), label: "ci" };

      await store.addApiKey(extra);
      expect(await store.findApiKeyByHash(extra.hash)).toEqual(extra);
      await expect(store.addApiKey({ ...extra, id: nextId("apiKey") })).rejects.toMatchObject({ code: "conflict" });
    });

    it("answers undefined or empty for what does not exist", async () => {
      const store = await makeStore();
      expect(await store.getUser(nextId("user"))).toBeUndefined();
      expect(await store.findUserByUsername("nobody")).toBeUndefined();
      expect(await store.getWorkspace(nextId("workspace"))).toBeUndefined();
      expect(await store.findApiKeyByHash(hashApiKey("no-such-key-0123456789"))).toBeUndefined();
      expect(await store.listWorkspacesOfUser(nextId("user"))).toEqual([]);
      expect(await store.listProjects(nextId("workspace"))).toEqual([]);
    });

    it("keeps tenants apart: no membership in another account's workspace", async () => {
      const store = await makeStore();
      const alice = newAccount("alice");
      const bob = newAccount("bob");
      await store.createAccount(alice);
      await store.createAccount(bob);

      expect(await store.getMembership(bob.workspace.id, alice.user.id)).toBeUndefined();
      expect((await store.listWorkspacesOfUser(alice.user.id)).map((w) => w.id)).toEqual([alice.workspace.id]);
      expect((await store.listProjects(bob.workspace.id)).map((p) => p.id)).toEqual([bob.project.id]);
    });
  });
}
