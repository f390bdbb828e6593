import { describe, expect, it } from "vitest";
import { routes } from "#http/routes";
import { createRouter } from "#http/routing";

const match = createRouter(routes);

describe("router", () => {
  it("finds a route and decodes its path parameters", () => {
    const found = match("GET", "/v1/workspaces/o_abc%20def/projects");
    expect(found).toMatchObject({
      kind: "found",
      route: { name: "list-workspace-projects" },
      params: { workspace_id: "o_abc def" },
    });
  });

  it("ignores one trailing slash, as the spec writes some paths with one", () => {
    expect(match("GET", "/v1/users/me/")).toMatchObject({ kind: "found", route: { name: "get-me" } });
  });

  it("tells a wrong method (with the allowed ones) from an unknown path", () => {
    expect(match("DELETE", "/v1/users/me")).toEqual({ kind: "wrong-method", allowed: ["GET"] });
    expect(match("GET", "/v1/users/you")).toEqual({ kind: "not-found" });
    expect(match("GET", "/users/me")).toEqual({ kind: "not-found" });
    expect(match("GET", "/v1/workspaces/o_1/projects/extra")).toEqual({ kind: "not-found" });
  });

  it("keeps a malformed escape instead of failing, for the schema to reject", () => {
    expect(match("GET", "/v1/workspaces/%E0%A4%A")).toMatchObject({
      kind: "found",
      params: { workspace_id: "%E0%A4%A" },
    });
  });
});
