import { describe, expect, it } from "vitest";
import { APPS_WITHOUT_ACCOUNTS, accountProblem, MASK, maskCredentials } from "#core/app-accounts";
import type { AppAccountRecord } from "#core/ports/app-account-store";
import type { PropDescription } from "#runtime/protocol";

const app = (slug: string, authFields?: string[]): PropDescription => ({
  name: slug,
  type: "app",
  app: slug,
  ...(authFields ? { authFields } : {}),
});

const account = (workspaceId: string, slug: string): AppAccountRecord => ({
  id: "apn_1",
  workspaceId,
  ownerId: "u_1",
  app: slug,
  name: "mine",
  sealedCredentials: "sealed",
  healthy: true,
  createdAt: 0,
  updatedAt: 0,
  version: 1,
});

describe("which app props can be deployed", () => {
  it("lets an app of the no-account list run unset, whatever its code reads of $auth", () => {
    for (const slug of ["http", "schedule", "rss", "helper_functions", "data_stores", "formatting"]) {
      expect(APPS_WITHOUT_ACCOUNTS.has(slug)).toBe(true);
      expect(accountProblem(app(slug, ["token"]), undefined, undefined, "ws_1")).toBeUndefined();
    }
  });

  it("lets an app whose code reads no $auth field run with the empty $auth", () => {
    expect(accountProblem(app("text_tools"), undefined, undefined, "ws_1")).toBeUndefined();
    expect(accountProblem(app("text_tools", []), {}, undefined, "ws_1")).toBeUndefined();
  });

  it("refuses an unset app whose code reads $auth fields, naming three, except while configuring", () => {
    expect(accountProblem(app("github", ["a", "b", "c", "d"]), undefined, undefined, "ws_1")).toBe(
      'needs a connected account of the "github" app (its code reads $auth.a, $auth.b, $auth.c, ...): connect one with POST /v1/accounts and configure the prop as {"authProvisionId": "apn_..."}',
    );
    expect(accountProblem(app("github", ["a"]), undefined, undefined, "ws_1", true)).toBeUndefined();
  });

  it("lets an app prop the code marks optional stay unset, though its code reads $auth fields", () => {
    expect(
      accountProblem({ ...app("github", ["token"]), optional: true }, undefined, undefined, "ws_1"),
    ).toBeUndefined();
    // A named account is checked all the same.
    expect(
      accountProblem({ ...app("github", ["token"]), optional: true }, { authProvisionId: "apn_9" }, undefined, "ws_1"),
    ).toBe("names apn_9, which is no connected account of this workspace");
  });

  it("accepts the workspace's account of the prop's app, also for an app that needs none", () => {
    expect(accountProblem(app("github"), { authProvisionId: "apn_1" }, account("ws_1", "github"), "ws_1")).toBe(
      undefined,
    );
    expect(accountProblem(app("http"), { authProvisionId: "apn_1" }, account("ws_1", "http"), "ws_1")).toBe(undefined);
  });

  it("says the same of an account of another workspace as of none, and names another app's", () => {
    const none = accountProblem(app("github"), { authProvisionId: "apn_1" }, undefined, "ws_1");
    expect(none).toBe("names apn_1, which is no connected account of this workspace");
    expect(accountProblem(app("github"), { authProvisionId: "apn_1" }, account("ws_2", "github"), "ws_1")).toBe(none);
    expect(accountProblem(app("github"), { authProvisionId: "apn_1" }, account("ws_1", "slack"), "ws_1")).toBe(
      'names the connected account apn_1 of the "slack" app; this prop needs an account of the "github" app',
    );
  });
});

describe("masking credentials", () => {
  it("replaces each value in clear and JSON-escaped", () => {
    const secret = 'pa"ss\\word-123';
    const text = `a ${secret} b ${JSON.stringify({ p: secret })}`;
    const masked = maskCredentials(text, [secret]);
    expect(masked).toBe(`a ${MASK} b {"p":"${MASK}"}`);
  });
});
