import { describe, expect, it } from "vitest";
import { formatId, isId } from "#core/ids";
import { randomIdGenerator } from "#ports/id-generator";

describe("ids", () => {
  it("carries the spec's prefix and validates only well-formed ids of its kind", () => {
    const id = formatId("source", 1_790_000_000_000, new Uint8Array(12).fill(7));
    expect(id).toMatch(/^dc_[0-9a-z]{22}$/);
    expect(isId("source", id)).toBe(true);
    expect(isId("workspace", id)).toBe(false);
    expect(isId("source", `${id}x`)).toBe(false);
    expect(isId("source", "dc_ABC")).toBe(false);
  });

  it("sorts by creation time as plain strings", () => {
    let now = 1_790_000_000_000;
    const ids = randomIdGenerator({ nowMs: () => now });
    const made = Array.from({ length: 50 }, () => {
      now += 1;
      return ids.newId("project");
    });
    expect([...made].sort()).toEqual(made);
  });

  it("makes distinct ids within one millisecond", () => {
    const ids = randomIdGenerator({ nowMs: () => 1_790_000_000_000 });
    const made = new Set(Array.from({ length: 1000 }, () => ids.newId("user")));
    expect(made.size).toBe(1000);
  });
});
