import { createHash } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { npmInstallSpec } from "#adapters/npm/import-specifier";
import { npmCacheFolder } from "#adapters/npm/package-cache";

describe("npm cache folders", () => {
  it("hashes name@range, with latest standing for a missing range", () => {
    const hash = (text: string) => createHash("sha256").update(text).digest("hex");
    expect(npmInstallSpec("axios", undefined)).toBe("axios@latest");
    expect(npmCacheFolder("/cache", "axios", undefined)).toBe(join("/cache", hash("axios@latest")));
    expect(npmCacheFolder("/cache", "@s/p", "^1")).toBe(join("/cache", hash("@s/p@^1")));
  });
});
