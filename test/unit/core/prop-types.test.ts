import { describe, expect, it } from "vitest";
import { SEALED_SECRET } from "#core/component-model";
import { configuredPropsView, runtimeProps, validateConfiguredProps } from "#core/props";
import type { PropDescription } from "#runtime/protocol";

/** Issues of the validation error `fn` throws. */
function issuesOf(fn: () => unknown) {
  try {
    fn();
  } catch (error) {
    expect(error).toMatchObject({ name: "DomainError", code: "validation" });
    return (error as { issues: { field: string; message: string }[] }).issues;
  }
  throw new Error("expected a validation error");
}

const values = (defs: PropDescription[], input: unknown) => validateConfiguredProps(defs, input).values;

// Edges of today's behaviour that props.test.ts does not pin, so that the table of prop types
// provably changes none of them.
describe("prop types: behaviour the table keeps", () => {
  it.each(["constructor", "toString", "__proto__", "hasOwnProperty", "sql", "$.airtable.baseId"])(
    "takes any JSON value for the unlisted type %j, bound by its options",
    (type) => {
      expect(values([{ name: "p", type }], { p: { a: [1] } })).toEqual({ p: { a: [1] } });
      expect(values([{ name: "p", type }], { p: 3 })).toEqual({ p: 3 });
      const withOptions: PropDescription = { name: "p", type, options: ["a", "b"] };
      expect(issuesOf(() => validateConfiguredProps([withOptions], { p: "c" }))).toEqual([
        { field: "configured_props.p", message: 'must be one of "a", "b"' },
      ]);
    },
  );

  it("counts null as absent for an unlisted type, and as a value for any", () => {
    expect(issuesOf(() => validateConfiguredProps([{ name: "p", type: "sql" }], { p: null }))).toEqual([
      { field: "configured_props.p", message: "is required" },
    ]);
    expect(values([{ name: "p", type: "any" }], { p: null })).toEqual({ p: null });
  });

  it("checks only options on the items of an array of a non-scalar type", () => {
    expect(values([{ name: "p", type: "object[]" }], { p: [1, "x", null] })).toEqual({ p: [1, "x", null] });
    expect(issuesOf(() => validateConfiguredProps([{ name: "p", type: "object[]" }], { p: {} }))).toEqual([
      { field: "configured_props.p", message: "must be an array of object values" },
    ]);
    const def: PropDescription = { name: "p", type: "sql[]", options: [{ label: "A", value: "a" }] };
    expect(values([def], { p: [{ __lv: { label: "A", value: "a" } }] })).toEqual({ p: ["a"] });
    expect(issuesOf(() => validateConfiguredProps([def], { p: ["a", "b"] }))).toEqual([
      { field: "configured_props.p", message: 'item 1: must be one of "a"' },
    ]);
  });

  it("refuses a typeless prop even when it is static, and gives a static alert no value", () => {
    expect(
      issuesOf(() => validateConfiguredProps([{ name: "p", type: "unknown", static: 1 }], {}))[0]?.message,
    ).toMatch(/^has no type/);
    expect(values([{ name: "p", type: "alert", static: "x", content: "c", alertType: "info" }], {})).toEqual({});
  });

  it("stores the static value of an interface prop, and refuses another", () => {
    const def: PropDescription = { name: "h", type: "$.interface.http", static: { fixed: true } };
    const result = validateConfiguredProps([def], {});
    expect(result.values).toEqual({ h: { fixed: true } });
    expect(result.http).toEqual({ propName: "h", customResponse: false });
    expect(issuesOf(() => validateConfiguredProps([def], { h: {} }))[0]?.message).toMatch(/^is static/);
  });

  it("counts null as absent for app, data_store and http_request props, which are never required", () => {
    const defs: PropDescription[] = [
      { name: "a", type: "app", app: "slack" },
      { name: "d", type: "data_store" },
      { name: "r", type: "http_request" },
    ];
    expect(validateConfiguredProps(defs, { a: null, d: null, r: null })).toEqual({
      values: {},
      secretNames: [],
      dbPropNames: [],
    });
  });

  it("seals a static secret string, and never a secret of another type", () => {
    const defs: PropDescription[] = [
      { name: "s", type: "string", secret: true, static: "k" },
      { name: "o", type: "object", secret: true },
      { name: "x", type: "sql", secret: true },
    ];
    expect(validateConfiguredProps(defs, { o: {}, x: "q" }).secretNames).toEqual(["s"]);
  });

  it("reads back values of every prop but secret strings, alerts and sealed values", () => {
    const defs: PropDescription[] = [
      { name: "list", type: "string[]", secret: true },
      { name: "clear", type: "string", secret: true },
      { name: "typeless", type: "unknown" },
      { name: "note", type: "alert", alertType: "info", content: "x" },
      { name: "sealedObject", type: "object" },
      { name: "ds", type: "data_store" },
    ];
    const stored = {
      list: ["a"],
      clear: "in clear",
      typeless: 1,
      note: "left by older code",
      sealedObject: { [SEALED_SECRET]: "v1.x" },
      ds: { key: "k" },
    };
    expect(configuredPropsView(defs, stored, {})).toStrictEqual({ list: ["a"], typeless: 1, ds: { key: "k" } });
  });

  it("hands a run every value but an alert's, and names every type but alert", () => {
    const defs: PropDescription[] = [
      { name: "typeless", type: "unknown" },
      { name: "sql", type: "sql" },
      { name: "note", type: "alert", alertType: "info", content: "x" },
      { name: "req", type: "http_request" },
    ];
    const out = runtimeProps(defs, { typeless: 1, sql: "q", note: "old", req: { url: "u" } }, {});
    expect(out).toStrictEqual({
      props: { typeless: 1, sql: "q", req: { url: "u" } },
      propTypes: { typeless: "unknown", sql: "sql", req: "http_request" },
    });
  });

  it("gives a timer without a stored spec only its type, and reads it back as nothing", () => {
    const defs: PropDescription[] = [{ name: "t", type: "$.interface.timer" }];
    expect(runtimeProps(defs, { t: { other: 1 } }, {}).props).toStrictEqual({ t: { type: "$.interface.timer" } });
    expect(configuredPropsView(defs, { t: { other: 1 } }, {})).toStrictEqual({});
  });
});
