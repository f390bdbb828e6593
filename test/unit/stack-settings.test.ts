import { describe, expect, it } from "vitest";
import { intContext, logRetentionOf } from "../../lib/stack-settings.ts";

describe("intContext", () => {
  it("reads a whole number given as -c name=12 (a string) or in cdk.json (a number), undefined when unset", () => {
    expect(intContext("12", "maxStreams", { min: 1, max: 100 })).toBe(12);
    expect(intContext(12, "maxStreams", { min: 1, max: 100 })).toBe(12);
    expect(intContext(undefined, "maxStreams", { min: 1, max: 100 })).toBeUndefined();
  });

  it("refuses what is not a whole number within bounds, naming the value and the rule", () => {
    for (const bad of ["", "1.5", "-3", "12abc", "0x10", "101", 0, true, {}]) {
      expect(() => intContext(bad, "maxStreams", { min: 1, max: 100 }), JSON.stringify(bad)).toThrow(
        /Invalid maxStreams .*whole number from 1 to 100/,
      );
    }
  });
});

describe("logRetentionOf", () => {
  it("reads a retention CloudWatch Logs accepts", () => {
    expect(logRetentionOf("7")).toBe(7);
    expect(logRetentionOf("3653")).toBe(3653);
    expect(logRetentionOf(undefined)).toBeUndefined();
  });

  it("refuses a number of days CloudWatch Logs does not offer, and never-expiring logs", () => {
    expect(() => logRetentionOf("10")).toThrow(/CloudWatch Logs keeps events 1, 3, 5, 7, 14, 30,/);
    expect(() => logRetentionOf("9999")).toThrow(/Invalid logRetentionDays/);
    expect(() => logRetentionOf("week")).toThrow(/Invalid logRetentionDays "week"/);
  });
});
