import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isJsonValue, jsonObjectSchema, jsonValueSchema } from "#core/json-value";
import { toJson } from "#runtime/describe-component";
import { jsonBytesWithin, MAX_JSON_VALUE_DEPTH } from "#runtime/json-value";
import type { Json } from "#runtime/protocol";

describe("JSON checked without a copy", () => {
  it("accepts JSON data up to 1,000 levels deep and refuses what JSON cannot carry, or what trusted code cannot serialise", () => {
    const nested = (levels: number) => {
      let deep: unknown = 1;
      for (let i = 0; i < levels; i++) deep = [deep];
      return deep;
    };
    for (const value of [null, true, 0, -1.5, "", "x", [], {}, { a: [1, { b: null }] }, nested(MAX_JSON_VALUE_DEPTH)]) {
      expect(isJsonValue(value)).toBe(true);
    }
    // Walked without recursion, then refused: `JSON.stringify` of it would overflow the stack.
    expect(isJsonValue(nested(100_000))).toBe(false);
    expect(isJsonValue(nested(MAX_JSON_VALUE_DEPTH + 1))).toBe(false);
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

describe("toJson: what a component's value becomes (emits, exports, return values, sends)", () => {
  it("carries what JSON.stringify carries, for any value it accepts", () => {
    const value = fc.anything({
      key: fc.string().filter((key) => key !== "__proto__"),
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withTypedArray: true,
      withSparseArray: true,
      withNullPrototype: true,
    });
    fc.assert(
      fc.property(value, (input) => {
        expect(JSON.stringify(toJson(input))).toBe(JSON.stringify(input));
      }),
      { numRuns: 500 },
    );
  });

  it("uses toJSON as JSON does: a URL as its text, a Buffer as {type, data}, a class's own form, with its key", () => {
    class Money {
      constructor(readonly cents: number) {}
      toJSON(key: string) {
        return `${key}: $${this.cents / 100}`;
      }
    }
    const value = {
      url: new URL("https://a.example/x?y=1"),
      buffer: Buffer.from("hi"),
      price: new Money(150),
      list: [new Money(5)],
      when: new Date(0),
      never: new Date(Number.NaN),
    };
    expect(toJson(value)).toEqual({
      url: "https://a.example/x?y=1",
      buffer: { type: "Buffer", data: [104, 105] },
      price: "price: $1.5",
      list: ["0: $0.05"],
      when: "1970-01-01T00:00:00.000Z",
      never: null,
    });
    expect(toJson(value)).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it("cuts a cycle and drops a bigint where JSON.stringify would throw, also when toJSON answers them", () => {
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = cycle;
    const loops = { toJSON: () => cycle };
    expect(toJson({ cycle, loops, big: 10n, boxed: Object(5) })).toEqual({
      cycle: { a: 1 },
      loops: { a: 1 },
      boxed: 5,
    });
  });
});

describe("jsonBytesWithin", () => {
  const textBytes = (value: Json) => Buffer.byteLength(JSON.stringify(value));

  it("counts the bytes of JSON.stringify exactly when they fit", () => {
    const json = fc.jsonValue().map((value) => toJson(value) ?? null);
    const odd = fc.constantFrom<Json>(
      '\u0000\n"\\',
      "\ud800",
      "é😀",
      { "\u2028": [-0, 1e21, 1.5] },
      JSON.parse('{"__proto__":[1]}'),
    );
    fc.assert(
      fc.property(fc.oneof(json, odd), (value) => {
        expect(jsonBytesWithin(value, Number.MAX_SAFE_INTEGER)).toBe(textBytes(value));
      }),
      { numRuns: 500 },
    );
  });

  it("gives up past the limit without building the text: 100 references to one 1 MiB string", () => {
    const mb = "x".repeat(1 << 20);
    const limit = 8 * 1024 * 1024;
    for (const value of [Array(100).fill(mb), { a: Array(100).fill({ [mb]: mb }) }]) {
      const counted = jsonBytesWithin(value, limit);
      // Stopped at the first string past the limit, not at 100 MB.
      expect(counted).toBeGreaterThan(limit);
      expect(counted).toBeLessThan(limit + 3 * (1 << 20));
    }
    // A string longer than the room left is over without being escaped.
    expect(jsonBytesWithin("y".repeat(100 << 20), limit)).toBeGreaterThan(limit);
    expect(jsonBytesWithin(Array(7).fill(mb), limit)).toBe(textBytes(Array(7).fill(mb)));
  });
});
