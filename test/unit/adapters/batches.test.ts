import { describe, expect, it } from "vitest";
import { consecutiveBatches } from "#adapters/aws/batches";

const bounds = { maxItems: 3, maxBytes: 10, sizeOf: (size: number) => size };

describe("consecutiveBatches", () => {
  it("gives no batch for empty input", () => {
    expect(consecutiveBatches([], bounds)).toEqual([]);
  });

  it("fills a batch up to exactly maxItems and maxBytes", () => {
    expect(consecutiveBatches([1, 1, 1, 1], bounds)).toEqual([[1, 1, 1], [1]]);
    expect(consecutiveBatches([4, 6, 1], bounds)).toEqual([[4, 6], [1]]);
    expect(consecutiveBatches([10, 10], bounds)).toEqual([[10], [10]]);
  });

  it("starts a new batch when the next item would pass maxBytes", () => {
    expect(consecutiveBatches([5, 6, 4], bounds)).toEqual([[5], [6, 4]]);
  });

  it("puts an item over maxBytes alone in its own batch, order kept", () => {
    expect(consecutiveBatches([2, 11, 3], bounds)).toEqual([[2], [11], [3]]);
    expect(consecutiveBatches([11], bounds)).toEqual([[11]]);
  });

  it("keeps every item once, in order, with sizes taken from sizeOf", () => {
    const items = ["aaaa", "bb", "cccccc", "d", "eeeeeeeeeeee", "ff"];
    const batches = consecutiveBatches(items, { maxItems: 2, maxBytes: 8, sizeOf: (item) => item.length });
    expect(batches).toEqual([["aaaa", "bb"], ["cccccc", "d"], ["eeeeeeeeeeee"], ["ff"]]);
    expect(batches.flat()).toEqual(items);
  });
});
