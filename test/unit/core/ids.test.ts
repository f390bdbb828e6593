import { describe, expect, it } from "vitest";
import { formatId, isId } from "#core/ids";
import { randomIdGenerator } from "#core/ports/id-generator";

describe("ids", () => {
  it("carries the spec's prefix and validates only well-formed ids of its kind", () => {
    const id = formatId("source", 1_790_000_000_000, new Uint8Array(12).fill(7));
    expect(id).toMatch(/^dc_[0-9a-z]{22}$/);
    expect(isId("source", id)).toBe(true);
    expect(isId("workspace", id)).toBe(false);
  });

  it("accepts ids shaped like the hosted service's: a known prefix and 1 to 64 of [A-Za-z0-9_-]", () => {
    for (const [kind, id] of [
      ["workflow", "p_MOCn3Ez"],
      ["source", "dc_abc123"],
      ["source", "dc_ABC"],
      ["source", `dc_${"x".repeat(64)}`],
      ["source", "dc_a-b_c"],
      ["webhook", "wh_1"],
    ] as const) {
      expect(isId(kind, id), id).toBe(true);
    }
    for (const [kind, id] of [
      ["source", "dc_"],
      ["source", `dc_${"x".repeat(65)}`],
      ["source", "dc_*"],
      ["source", "dc_a b"],
      ["source", "dc_a.b"],
      ["source", "dc_é"],
      ["source", "dc_a\u0000"],
      ["source", "DC_abc"],
      ["workflow", "proj_abc"],
      ["source", "p_abc"],
    ] as const) {
      expect(isId(kind, id), id).toBe(false);
    }
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
