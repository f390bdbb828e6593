import { describe, expect, it } from "vitest";
import { currentCredentials } from "#core/account-credentials";
import { appIdOf } from "#core/app-catalog-file";
import { checkKeyCredentials } from "#core/connected-account-api";
import { createConnectedAccount } from "#core/connected-accounts";
import type { AppDefinition } from "#core/ports/app-catalog";
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

describe("checkKeyCredentials", () => {
  it("requires a field named like an Object property when the body gives none (own keys only)", () => {
    // The apps file refuses such names; a catalog built otherwise must still not pass `{}`.
    const app: AppDefinition = { id: "app_x", nameSlug: "x", name: "X", authType: "keys", fields: ["constructor"] };
    expect(() => checkKeyCredentials(app, {})).toThrow(/credentials\.constructor: is required/);
    expect(checkKeyCredentials(app, { constructor: "k" })).toEqual({ constructor: "k" });
  });
});
