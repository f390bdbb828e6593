import { describe, expect, it } from "vitest";
import { parseNpmSpecifier } from "#adapters/npm/import-specifier";

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
