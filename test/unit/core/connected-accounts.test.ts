import { describe, expect, it } from "vitest";
import { currentCredentials } from "#core/account-credentials";
import { appIdOf } from "#core/app-catalog-file";
import { createConnectedAccount } from "#core/connected-accounts";
import { memoryDeps } from "../../support/memory-deps.ts";

describe("createConnectedAccount", () => {
  it("stores the credentials sealed, and gives them back in clear to currentCredentials", async () => {
    const deps = memoryDeps();
    const app = { id: appIdOf("acme"), nameSlug: "acme", name: "Acme", authType: "keys" as const, fields: ["api_key"] };
    const record = await createConnectedAccount(deps, {
      workspaceId: "o_1",
      ownerId: "u_1",
      app,
      credentials: { api_key: "k-123-secret" },
    });
    expect(record).toMatchObject({ app: "acme", name: "Acme", healthy: true, version: 1, workspaceId: "o_1" });
    expect(record.id).toMatch(/^apn_/);
    const stored = await deps.appAccounts.get(record.id);
    expect(stored?.sealedCredentials).not.toContain("k-123-secret");
    expect(stored?.expiresAt).toBeUndefined();
    expect(await currentCredentials(deps, stored ?? record, 1_000)).toEqual({ api_key: "k-123-secret" });
  });
});
