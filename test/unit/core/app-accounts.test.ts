import { describe, expect, it } from "vitest";
import { APPS_WITHOUT_ACCOUNTS, accountProblem, requireAccounts } from "#core/app-accounts";
import type { PropDescription } from "#runtime/protocol";

const app = (slug: string, authFields?: string[]): PropDescription => ({
  name: slug,
  type: "app",
  app: slug,
  ...(authFields ? { authFields } : {}),
});

describe("which app props need a connected account", () => {
  it("lets an app of the no-account list run unset, whatever its code reads of $auth", () => {
    for (const slug of ["http", "schedule", "rss", "helper_functions", "data_stores", "formatting"]) {
      expect(APPS_WITHOUT_ACCOUNTS.has(slug)).toBe(true);
      expect(accountProblem(app(slug, ["token"]), undefined)).toBeUndefined();
    }
  });

  it("lets an app whose code reads no $auth field run with the empty $auth", () => {
    expect(accountProblem(app("text_tools"), undefined)).toBeUndefined();
    expect(accountProblem(app("text_tools", []), {})).toBeUndefined();
  });

  it("refuses an app whose code reads $auth fields, naming three of them", () => {
    expect(accountProblem(app("github", ["a", "b", "c", "d"]), undefined)).toBe(
      'needs a connected account of the "github" app (its code reads $auth.a, $auth.b, $auth.c, ...); Sluice has no connected accounts yet, so the component cannot run here',
    );
  });

  it("refuses any authProvisionId, also of an app that needs no account, since no account exists", () => {
    expect(accountProblem(app("http"), { authProvisionId: "apn_1" })).toMatch(
      /^names the connected account apn_1, which does not exist: Sluice has no connected accounts yet/,
    );
  });

  it("names every refused prop under the field prefix, and ignores props that are not apps", () => {
    const defs = [app("github", ["token"]), app("http"), { name: "note", type: "string" }, app("slack", ["bot"])];
    expect(() => requireAccounts(defs, { note: "x" }, "steps[2].props")).toThrow(
      expect.objectContaining({
        code: "validation",
        issues: [
          { field: "steps[2].props.github", message: expect.any(String) },
          { field: "steps[2].props.slack", message: expect.any(String) },
        ],
      }),
    );
    expect(() => requireAccounts([app("http")], {})).not.toThrow();
  });
});
