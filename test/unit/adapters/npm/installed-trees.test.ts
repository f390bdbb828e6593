import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zipSync } from "fflate";
import { afterAll, describe, expect, it } from "vitest";
import { packTree, resolvedTreeKey, unpackTree } from "#adapters/npm/installed-trees";

const root = mkdtempSync(join(tmpdir(), "sluice-trees-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const lock = (packages: Record<string, { version: string; name?: string }>) =>
  JSON.stringify({ lockfileVersion: 3, packages: { "": { name: "x", dependencies: {} }, ...packages } });

describe("resolvedTreeKey", () => {
  const a = { "node_modules/app": { version: "2.1.0" }, "node_modules/@s/util": { version: "1.1.0" } };
  it("is the same for the same name@version set, in any order, and differs by platform and by any version", () => {
    const reordered = { "node_modules/@s/util": { version: "1.1.0" }, "node_modules/app": { version: "2.1.0" } };
    expect(resolvedTreeKey(lock(a), "linux-arm64")).toBe(resolvedTreeKey(lock(reordered), "linux-arm64"));
    expect(resolvedTreeKey(lock(a), "linux-arm64")).not.toBe(resolvedTreeKey(lock(a), "linux-x64"));
    const bumped = { ...a, "node_modules/@s/util": { version: "1.1.1" } };
    expect(resolvedTreeKey(lock(a), "linux-arm64")).not.toBe(resolvedTreeKey(lock(bumped), "linux-arm64"));
    expect(resolvedTreeKey(lock(a), "linux-arm64")).toMatch(/^[0-9a-f]{64}$/);
  });
  it("refuses a lockfile that lists no package", () => {
    expect(() => resolvedTreeKey(lock({}), "linux-arm64")).toThrow(/no package/);
  });
});

describe("packTree and unpackTree", () => {
  it("round-trips a tree's regular files, leaving links out", async () => {
    const from = join(root, "from");
    mkdirSync(join(from, "node_modules", "app", "lib"), { recursive: true });
    writeFileSync(join(from, "node_modules", "app", "package.json"), '{"name":"app"}');
    writeFileSync(join(from, "node_modules", "app", "lib", "index.js"), "module.exports = 1;");
    mkdirSync(join(from, "node_modules", ".bin"));
    symlinkSync("../app/lib/index.js", join(from, "node_modules", ".bin", "app"));
    writeFileSync(join(from, "package-lock.json"), "{}");
    const to = join(root, "to");
    await unpackTree(await packTree(from), to);
    expect(readFileSync(join(to, "node_modules", "app", "lib", "index.js"), "utf8")).toBe("module.exports = 1;");
    expect(existsSync(join(to, "node_modules", ".bin", "app"))).toBe(false);
    expect(existsSync(join(to, "package-lock.json"))).toBe(false);
  });

  it("writes nothing of a stored tree that names a file outside node_modules", async () => {
    for (const name of ["node_modules/../../evil.js", "/etc/evil.js", "package.json", "node_modules\\..\\evil.js"]) {
      const to = mkdtempSync(join(root, "hostile-"));
      const zip = zipSync({ "node_modules/ok/index.js": new Uint8Array([1]), [name]: new Uint8Array([2]) });
      await expect(unpackTree(zip, to), name).rejects.toThrow(/outside node_modules/);
      expect(existsSync(join(to, "node_modules")), name).toBe(false);
    }
  });
});
