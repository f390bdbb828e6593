import { describe, expect, it } from "vitest";
import { isJsonValue, jsonObjectSchema, jsonValueSchema } from "#core/json-value";
import { toJson } from "#runtime/describe-component";

describe("JSON checked without a copy", () => {
  it("accepts JSON data at any depth and refuses what JSON cannot carry", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    for (const value of [null, true, 0, -1.5, "", "x", [], {}, { a: [1, { b: null }] }, deep]) {
      expect(isJsonValue(value)).toBe(true);
    }
    for (const value of [undefined, Number.NaN, Number.POSITIVE_INFINITY, () => 1, Symbol("s"), 1n, new Date(0)]) {
      expect(isJsonValue(value)).toBe(false);
      expect(isJsonValue({ nested: [value] })).toBe(false);
    }
    expect(jsonObjectSchema.safeParse([]).success).toBe(false);
  });

  it("hands the value on as it is, a __proto__ key included (the sandbox's copy keeps it too)", () => {
    const parsed = JSON.parse('{"__proto__":{"x":1},"a":{"__proto__":[2]}}');
    for (const out of [jsonValueSchema.parse(parsed), jsonObjectSchema.parse(parsed), toJson(parsed)]) {
      expect(Object.getOwnPropertyDescriptor(out, "__proto__")?.value).toEqual({ x: 1 });
      expect(Object.getOwnPropertyDescriptor((out as { a: object }).a, "__proto__")?.value).toEqual([2]);
      expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    }
  });
});
