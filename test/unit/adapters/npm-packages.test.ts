import { createHash } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  compareVersions,
  npmCacheFolder,
  npmInstallSpec,
  npmReason,
  parseNpmSpecifier,
  parseVersion,
  satisfiesRange,
} from "#adapters/local/npm-packages";

describe("parseNpmSpecifier", () => {
  it.each([
    ["axios", { name: "axios", range: undefined, subpath: undefined }],
    ["axios@^1", { name: "axios", range: "^1", subpath: undefined }],
    ["lodash@~4.17", { name: "lodash", range: "~4.17", subpath: undefined }],
    ["lodash@4.17.21/fp", { name: "lodash", range: "4.17.21", subpath: "fp" }],
    ["lodash/fp/get", { name: "lodash", range: undefined, subpath: "fp/get" }],
    ["@pipedream/platform", { name: "@pipedream/platform", range: undefined, subpath: undefined }],
    ["@scope/name@^1/sub", { name: "@scope/name", range: "^1", subpath: "sub" }],
    ["@scope/name/dist/a.js", { name: "@scope/name", range: undefined, subpath: "dist/a.js" }],
    ["uuid@>=9 <12", { name: "uuid", range: ">=9 <12", subpath: undefined }],
    ["left-pad@latest", { name: "left-pad", range: "latest", subpath: undefined }],
    ["JSONStream", { name: "JSONStream", range: undefined, subpath: undefined }],
  ])("parses %s", (specifier, expected) => {
    expect(parseNpmSpecifier(specifier)).toEqual(expected);
  });

  it.each([
    ["a scope without a name", "@scope"],
    ["an empty scope", "@/name"],
    ["an empty range", "axios@"],
    ["a git range", "pkg@github:user"],
    ["a file range", "pkg@file:..%2Fx"],
    ["a URL range", "pkg@https:"],
    ["a subpath leaving the package", "pkg/../../etc/passwd"],
    ["an empty subpath", "pkg/"],
    ["a name with a space", "my pkg"],
    ["a name starting with a dot", ".bin"],
    ["a name over 214 characters", "a".repeat(215)],
  ])("rejects %s", (_what, specifier) => {
    expect(parseNpmSpecifier(specifier)).toBeUndefined();
  });
});

describe("satisfiesRange", () => {
  it.each([
    ["3.4.0", "^3"],
    ["3.4.0", "^3.4"],
    ["3.4.0", "^3.0.1"],
    ["3.4.0", "3.x"],
    ["3.4.0", "3.4.x"],
    ["3.4.0", "3"],
    ["3.4.0", "3.4"],
    ["3.4.0", "3.4.0"],
    ["3.4.0", "=3.4.0"],
    ["3.4.0", "v3.4.0"],
    ["3.4.0", "*"],
    ["3.4.0", "x"],
    ["3.4.0", ""],
    ["3.4.0", "~3.4"],
    ["3.4.9", "~3.4.1"],
    ["3.4.0", ">=3"],
    ["3.4.0", ">= 3.4.0"],
    ["3.4.0", ">=1.2.3 <4"],
    ["3.4.0", ">3.3"],
    ["3.4.0", "<=3.4"],
    ["3.4.0", "<3.5"],
    ["3.4.0", "^1 || ^3"],
    ["3.4.0", "2 - 3"],
    ["3.4.0", "3.0.0 - 3.4.0"],
    ["0.2.5", "^0.2.3"],
    ["0.0.3", "^0.0.3"],
    ["0.9.0", "^0"],
    ["1.0.0-beta.2", "^1.0.0-beta.1"],
    ["1.0.0-beta.11", ">1.0.0-beta.2"],
    ["1.2.3+build.5", "1.2.3"],
  ])("%s satisfies %s", (version, range) => {
    expect(satisfiesRange(version, range)).toBe(true);
  });

  it.each([
    ["3.4.0", "^1"],
    ["3.4.0", "^3.5"],
    ["3.4.0", "^99"],
    ["3.4.0", "3.5.x"],
    ["3.4.0", "3.4.1"],
    ["3.4.0", "~3.3"],
    ["3.5.0", "~3.4.1"],
    ["3.4.0", ">3.4.0"],
    ["3.4.0", ">3.4"],
    ["3.4.0", "<3.4"],
    ["3.4.0", "<=3.3"],
    ["3.4.0", ">=1 <3"],
    ["3.4.0", "^1 || ^2"],
    ["3.4.0", "1 - 3.3"],
    ["0.3.0", "^0.2.3"],
    ["0.0.4", "^0.0.3"],
    ["1.0.0", "^0"],
    ["2.0.0-beta.1", "^1"],
    ["3.5.0-rc.1", "^3"],
    ["1.0.0-beta.1", "^1.0.0-beta.2"],
    ["3.4.0", "latest"],
    ["3.4.0", "next"],
    ["3.4.0", "^3.4.0.1"],
    ["3.4.0", "<*"],
    ["not-a-version", "*"],
  ])("%s does not satisfy %s", (version, range) => {
    expect(satisfiesRange(version, range)).toBe(false);
  });
});

describe("compareVersions", () => {
  it("orders prereleases before their release and numerically by identifier", () => {
    const ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0"];
    const parsed = ordered.map((text) => parseVersion(text)!);
    const shuffled = [...parsed].reverse().sort(compareVersions);
    expect(shuffled).toEqual(parsed);
  });
});

describe("npm cache folders", () => {
  it("hashes name@range, with latest standing for a missing range", () => {
    const hash = (text: string) => createHash("sha256").update(text).digest("hex");
    expect(npmInstallSpec("axios", undefined)).toBe("axios@latest");
    expect(npmCacheFolder("/cache", "axios", undefined)).toBe(join("/cache", hash("axios@latest")));
    expect(npmCacheFolder("/cache", "@s/p", "^1")).toBe(join("/cache", hash("@s/p@^1")));
  });
});

describe("npmReason", () => {
  it("keeps npm's error code and first message line", () => {
    const stderr = [
      'npm warn Unknown user config "nodedir".',
      "npm error code E404",
      "npm error 404 Not Found - GET http://127.0.0.1:4873/nope - Not found",
      "npm error 404",
      "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log",
    ].join("\n");
    expect(npmReason(stderr)).toBe("E404 404 Not Found - GET http://127.0.0.1:4873/nope - Not found");
  });

  it("skips errno and syscall lines and reads the old ERR! prefix", () => {
    const stderr = [
      "npm ERR! code ECONNREFUSED",
      "npm ERR! syscall connect",
      "npm ERR! errno ECONNREFUSED",
      "npm ERR! FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED",
    ].join("\n");
    expect(npmReason(stderr)).toBe(
      "ECONNREFUSED FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED",
    );
  });

  it("caps long output and has a fallback for silent failures", () => {
    expect(npmReason(`npm error ${"x".repeat(1000)}`).length).toBe(300);
    expect(npmReason("")).toBe("npm install failed");
  });
});
