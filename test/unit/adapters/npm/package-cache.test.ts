import { createHash } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmInstallSpec } from "#adapters/npm/import-specifier";
import { nonRegistryPackage, npmCacheFolder } from "#adapters/npm/package-cache";

describe("npm cache folders", () => {
  it("hashes name@range, with latest standing for a missing range", () => {
    const hash = (text: string) => createHash("sha256").update(text).digest("hex");
    expect(npmInstallSpec("axios", undefined)).toBe("axios@latest");
    expect(npmCacheFolder("/cache", "axios", undefined)).toBe(join("/cache", hash("axios@latest")));
    expect(npmCacheFolder("/cache", "@s/p", "^1")).toBe(join("/cache", hash("@s/p@^1")));
  });
});

describe("nonRegistryPackage: what a lockfile may install", () => {
  const registry = "https://registry.npmjs.org/";
  const lock = (packages: Record<string, Record<string, unknown>>) =>
    JSON.stringify({ lockfileVersion: 3, packages: { "": { name: "x" }, ...packages } });
  const tarball = (name: string) => `https://registry.npmjs.org/${name}/-/${name}-1.0.0.tgz`;

  it("takes the registry's tarballs, and packages bundled inside one", () => {
    const text = lock({
      "node_modules/a": { version: "1.0.0", resolved: tarball("a") },
      "node_modules/a/node_modules/b": { version: "1.0.0", resolved: tarball("b") },
      "node_modules/c": { version: "1.0.0", inBundle: true },
    });
    expect(nonRegistryPackage(text, registry)).toBeUndefined();
  });

  it.each([
    ["a git repository", { resolved: "git+file:///srv/repo#abc" }, /leak does not come from the registry/],
    ["a local tarball", { resolved: "file:/etc/secret.tgz" }, /leak does not come from the registry/],
    ["another server", { resolved: "http://127.0.0.1:9/leak.tgz" }, /leak does not come from the registry/],
    ["no tarball at all", {}, /leak does not come from the registry/],
    ["a link to a folder", { resolved: "../../x", link: true }, /leak is a folder on disk/],
  ])("refuses %s, naming the package and no path", (_what, entry, reason) => {
    const text = lock({ "node_modules/a": { resolved: tarball("a") }, "node_modules/a/node_modules/leak": entry });
    expect(nonRegistryPackage(text, registry)).toMatch(reason);
    expect(nonRegistryPackage(text, registry)).not.toMatch(/srv|etc|127\.0\.0\.1|\.\.\//);
  });

  it("refuses a folder a link points to without naming its path", () => {
    expect(nonRegistryPackage(lock({ "../../../home/me/secret": { version: "1.0.0" } }), registry)).toBe(
      "a dependency is a folder on disk, not a package of the registry",
    );
  });
});
