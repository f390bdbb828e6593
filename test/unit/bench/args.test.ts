import { describe, expect, it } from "vitest";
import { parseArgs } from "../../../bench/lib/args.ts";

const KNOWN = ["ingest", "respond", "stream"];

describe("parseArgs", () => {
  it("runs everything at full length by default", () => {
    expect(parseArgs([], KNOWN)).toEqual({ only: [], quick: false, profile: false, out: undefined, help: false });
  });

  it("takes --only as a comma list, repeated, or with =, without duplicates", () => {
    expect(parseArgs(["--only", "ingest,stream"], KNOWN).only).toEqual(["ingest", "stream"]);
    expect(parseArgs(["--only", "ingest", "--only=respond", "--only", "ingest"], KNOWN).only).toEqual([
      "ingest",
      "respond",
    ]);
  });

  it("takes --quick, --profile and --out", () => {
    expect(parseArgs(["--quick", "--profile", "--out", "/tmp/x"], KNOWN)).toMatchObject({
      quick: true,
      profile: true,
      out: "/tmp/x",
    });
  });

  it("refuses unknown scenarios and flags, and flags without their value", () => {
    expect(() => parseArgs(["--only", "nope"], KNOWN)).toThrow(/unknown scenario "nope"/);
    expect(() => parseArgs(["--fast"], KNOWN)).toThrow(/unknown argument/);
    expect(() => parseArgs(["--only"], KNOWN)).toThrow(/needs a value/);
    expect(() => parseArgs(["--out", "--quick"], KNOWN)).toThrow(/needs a value/);
  });
});
