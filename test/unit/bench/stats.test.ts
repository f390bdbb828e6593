import { describe, expect, it } from "vitest";
import { percentile, round, roundAll, summarize } from "../../../bench/lib/stats.ts";

describe("percentile (nearest rank)", () => {
  const hundred = Array.from({ length: 100 }, (_, index) => index + 1);

  it("picks the smallest value with at least p percent of samples at or below it", () => {
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile(hundred, 100)).toBe(100);
    expect(percentile(hundred, 0)).toBe(1);
    expect(percentile([10, 20, 30], 50)).toBe(20);
    expect(percentile([10, 20, 30, 40], 50)).toBe(20);
    expect(percentile([10, 20, 30, 40], 51)).toBe(30);
  });

  it("is the maximum for p99 of fewer than 100 samples, and NaN when there are none", () => {
    expect(percentile([1, 2, 3, 1000], 99)).toBe(1000);
    expect(percentile([], 50)).toBeNaN();
  });

  it("refuses a percentile outside 0..100", () => {
    expect(() => percentile([1], 101)).toThrow(RangeError);
    expect(() => percentile([1], Number.NaN)).toThrow(RangeError);
  });
});

describe("summarize", () => {
  it("sorts numerically (not as strings) and reports every figure", () => {
    const summary = summarize([100, 9, 25, 3, 1000, 7]);
    expect(summary).toEqual({ count: 6, p50: 9, p90: 1000, p99: 1000, max: 1000, mean: 1144 / 6 });
  });

  it("does not reorder its input", () => {
    const values = [3, 1, 2];
    summarize(values);
    expect(values).toEqual([3, 1, 2]);
  });

  it("gives NaN figures for no samples", () => {
    expect(summarize([])).toMatchObject({ count: 0, p50: Number.NaN, max: Number.NaN, mean: Number.NaN });
  });
});

describe("round", () => {
  it("keeps two decimals under 10, one under 100, none above", () => {
    expect(round(1.23456)).toBe(1.23);
    expect(round(12.3456)).toBe(12.3);
    expect(round(123.456)).toBe(123);
    expect(round(Number.NaN)).toBeNaN();
  });
});

describe("roundAll", () => {
  it("rounds every figure of a summary the same way", () => {
    expect(roundAll(summarize([1.2345, 12.345, 123.45]))).toEqual({
      count: 3,
      p50: 12.3,
      p90: 123,
      p99: 123,
      max: 123,
      mean: 45.7,
    });
  });
});
