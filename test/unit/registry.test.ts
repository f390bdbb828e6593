import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_REGISTRY_DIR, readRegistryComponent } from "#adapters/registry-files";

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;
const KEYS = readdirSync(DEFAULT_REGISTRY_DIR)
  .filter((file) => file.endsWith(".mjs"))
  .map((file) => file.slice(0, -".mjs".length));

interface RegistryComponent {
  key: string;
  name: string;
  description: string;
  version: string;
  type: string;
  props: Record<string, { type?: string }>;
  run: unknown;
}

/** The registry files are the repo's own, trusted code: imported directly to read their metadata. */
async function load(key: string): Promise<RegistryComponent> {
  const module = (await import(pathToFileURL(join(DEFAULT_REGISTRY_DIR, `${key}.mjs`)).href)) as {
    default: RegistryComponent;
  };
  return module.default;
}

describe("registry components", () => {
  it("ships the documented components", () => {
    expect(KEYS).toEqual(
      expect.arrayContaining(["http-new-requests", "schedule-custom-interval", "http-send-request"]),
    );
  });

  it.each(KEYS)("%s: its key equals its file name and its version is semver", async (key) => {
    const component = await load(key);
    expect(component.key).toBe(key);
    expect(component.version).toMatch(SEMVER);
    expect(component.name).toEqual(expect.any(String));
    expect(component.description).toEqual(expect.any(String));
    expect(["source", "action"]).toContain(component.type);
    expect(component.run).toEqual(expect.any(Function));
  });

  it("declares the interfaces each source needs", async () => {
    expect((await load("http-new-requests")).props.http).toEqual({ type: "$.interface.http", customResponse: true });
    expect((await load("schedule-custom-interval")).props.timer).toMatchObject({
      type: "$.interface.timer",
      default: { intervalSeconds: 900 },
    });
    expect((await load("http-send-request")).type).toBe("action");
  });
});

describe("readRegistryComponent", () => {
  // A file the traversal keys below would reach if keys were joined into paths unchecked. Made at
  // collection time because the table of keys below names it.
  const outside = mkdtempSync(join(tmpdir(), "sluice-registry-"));
  writeFileSync(join(outside, "secret.mjs"), "export default {}");

  afterAll(() => {
    rmSync(outside, { recursive: true, force: true });
  });

  it.each(KEYS)("reads the code of %s", async (key) => {
    const code = await readRegistryComponent(DEFAULT_REGISTRY_DIR, key);
    expect(code).toContain(`key: "${key}"`);
    expect(code).toContain("export default");
  });

  it("returns undefined for a valid key without a file", async () => {
    expect(await readRegistryComponent(DEFAULT_REGISTRY_DIR, "no-such-component")).toBeUndefined();
  });

  it("returns undefined when the registry folder does not exist", async () => {
    expect(await readRegistryComponent(join(outside, "missing"), "http-new-requests")).toBeUndefined();
  });

  it.each([
    ["a parent-folder key", "../package"],
    ["a key with a slash", "sub/secret"],
    ["an absolute path", join(outside, "secret")],
    ["a traversal into another folder", `../../../../../../..${join(outside, "secret")}`],
    ["a key with a dot", "http-new-requests.mjs"],
    ["an uppercase key", "HTTP-new-requests"],
    ["a key starting with a dash", "-http"],
    ["an empty key", ""],
    ["a key over 100 characters", "a".repeat(101)],
    ["a key with a NUL byte", "http-new-requests\u0000"],
  ])("returns undefined for %s", async (_what, key) => {
    expect(await readRegistryComponent(DEFAULT_REGISTRY_DIR, key)).toBeUndefined();
  });

  it("reads from another registry folder when given one", async () => {
    expect(await readRegistryComponent(outside, "secret")).toBe("export default {}");
  });
});
