import { describe, expect, it } from "vitest";
import { requireWorkspace } from "#core/access";
import { authenticate, createAccount } from "#core/accounts";
import { bearerToken, hashApiKey } from "#core/api-keys";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";

describe("accounts and API keys", () => {
  it("stores only the SHA-256 of a generated key and authenticates with the key", async () => {
    const deps = memoryDeps();
    const account = await accountIn(deps, "ada");
    expect(account.apiKey).toMatch(/^sluice_[A-Za-z0-9_-]{32}$/);
    const stored = await deps.identity.findApiKeyByHash(hashApiKey(account.apiKey));
    expect(stored).toMatchObject({ userId: account.user.id, hash: hashApiKey(account.apiKey) });
    expect(JSON.stringify(stored)).not.toContain(account.apiKey);
    expect(await authenticate(deps, `Bearer ${account.apiKey}`)).toEqual({ userId: account.user.id });
  });

  it.each([
    ["no header", undefined],
    ["another scheme", "Basic dXNlcjpwYXNz"],
    ["an empty bearer", "Bearer "],
    ["a wrong key", "Bearer sluice_wrongwrongwrongwrongwrongwrongwr"],
    ["a key with a letter changed", "CHANGED"],
  ])("refuses %s as unauthorized", async (_, header) => {
    const deps = memoryDeps();
    const { apiKey } = await accountIn(deps, "ada");
    const value = header === "CHANGED" ? `Bearer ${apiKey.slice(0, -1)}${apiKey.endsWith("a") ? "b" : "a"}` : header;
    await expect(authenticate(deps, value)).rejects.toMatchObject({ code: "unauthorized" });
  });

  it("reads the bearer token case-insensitively and without trailing spaces", () => {
    expect(bearerToken("bearer abc ")).toBe("abc");
    expect(bearerToken("Bearer a b")).toBeUndefined();
  });

  it("uses an operator's key when given one and refuses short ones", async () => {
    const deps = memoryDeps();
    const account = await createAccount(deps, {
      username: "ci",
      email: "ci@example.com",
      apiKey: "ci-key-0123456789abcdef",
    });
    expect(account.apiKey).toBe("ci-key-0123456789abcdef");
    await expect(
      createAccount(deps, { username: "ci2", email: "ci@example.com", apiKey: "short" }),
    ).rejects.toMatchObject({
      code: "validation",
      message: expect.stringMatching(/^api_key: /),
    });
  });

  it.each([["Bad Name"], [""], ["-dash"], ["x".repeat(64)]])("refuses the username %j", async (username) => {
    await expect(createAccount(memoryDeps(), { username, email: "a@b.c" })).rejects.toMatchObject({
      code: "validation",
      message: expect.stringMatching(/^username: /),
    });
  });

  it("answers not found for another account's workspace, exactly as for a missing one", async () => {
    const deps = memoryDeps();
    const alice = await accountIn(deps, "alice");
    const bob = await accountIn(deps, "bob");
    const caller = { userId: alice.user.id };
    const other = requireWorkspace(deps, caller, bob.workspace.id).catch((e) => e.message);
    const missing = requireWorkspace(deps, caller, "o_doesnotexist").catch((e) => e.message);
    expect(await other).toBe(await missing);
    expect(await requireWorkspace(deps, caller, alice.workspace.id)).toMatchObject({ id: alice.workspace.id });
  });
});
