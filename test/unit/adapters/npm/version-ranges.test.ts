import { describe, expect, it } from "vitest";
import { compareVersions, parseVersion, satisfiesRange } from "#adapters/npm/version-ranges";

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
