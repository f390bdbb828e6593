import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { routes } from "#http/routes";

describe("route manifest", () => {
  it("names each route once, after its own file under functions/http/", () => {
    expect(new Set(routes.map((r) => r.name)).size).toBe(routes.length);
    for (const route of routes) {
      expect(existsSync(new URL(`../../../functions/http/${route.name}.ts`, import.meta.url)), route.name).toBe(true);
    }
  });

  it.each(routes.map((r) => [r.name, r] as const))(
    "%s exports the manifest's route and a Lambda handler",
    async (name, route) => {
      const module = await import(`../../../functions/http/${name}.ts`);
      expect(module.route).toBe(route);
      expect(typeof module.handler).toBe("function");
    },
  );

  it("gives every authenticated route table access, which checking a key needs", () => {
    const blind = routes.filter((r) => r.auth !== false && r.access.resources === undefined).map((r) => r.name);
    expect(blind).toEqual([]);
  });

  it("uses paths under /v1 with unique METHOD /path pairs", () => {
    const keys = routes.map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const route of routes) expect(route.path).toMatch(/^\/v1\//);
  });
});
