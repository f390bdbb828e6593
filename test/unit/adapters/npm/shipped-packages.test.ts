import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseNpmSpecifier } from "#adapters/npm/import-specifier";
import { CHECKOUT_NODE_MODULES, shippedFolder } from "#adapters/npm/shipped-packages";

const spec = (specifier: string) => parseNpmSpecifier(specifier)!;

describe("shippedFolder", () => {
  // A node_modules of our own, so the versions are known whatever the checkout ships.
  const root = mkdtempSync(join(tmpdir(), "sluice-shipped-"));
  const nodeModules = join(root, "node_modules");
  for (const [name, version] of [
    ["@pipedream/platform", "3.4.0"],
    ["left-pad", "1.3.0"],
  ] as const) {
    mkdirSync(join(nodeModules, name), { recursive: true });
    writeFileSync(join(nodeModules, name, "package.json"), JSON.stringify({ name, version }));
  }
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.each(["@pipedream/platform", "@pipedream/platform@^3", "@pipedream/platform@3.4.0/dist/x"])(
    "serves %s from the shipped node_modules",
    (specifier) => {
      expect(shippedFolder(`${nodeModules}/`, spec(specifier))).toBe(root);
    },
  );

  it.each([
    ["a range the shipped version misses", "@pipedream/platform@^4"],
    ["a dist-tag", "@pipedream/platform@next"],
    ["a package Sluice does not ship, even when present", "left-pad"],
    ["a shipped package that is missing", "axios"],
  ])("leaves %s to the cache", (_, specifier) => {
    expect(shippedFolder(nodeModules, spec(specifier))).toBeUndefined();
  });

  it("defaults to the checkout's node_modules, which holds @pipedream/platform", () => {
    expect(shippedFolder(CHECKOUT_NODE_MODULES, spec("@pipedream/platform"))).toBe(dirname(CHECKOUT_NODE_MODULES));
  });
});
