import { describe, expect, it } from "vitest";
import { SEALED_SECRET } from "#core/component-model";
import { PROP_TYPES, type PropType, PropValueError, propTypeOf } from "#core/prop-types";
import { configuredPropsView, runtimeProps, validateConfiguredProps } from "#core/props";
import type { Json, PropDescription } from "#runtime/protocol";
import { validationIssues as issuesOf } from "../../support/rejection.ts";

const values = (defs: PropDescription[], input: unknown) => validateConfiguredProps(defs, input).values;

// Edges of today's behaviour that props.test.ts does not pin, so that the table of prop types
// provably changes none of them.
describe("prop types: behaviour the table keeps", () => {
  it.each(["constructor", "toString", "__proto__", "hasOwnProperty", "sql", "$.airtable.baseId"])(
    "takes any JSON value for the unlisted type %j, its options being choices only",
    (type) => {
      expect(values([{ name: "p", type }], { p: { a: [1] } })).toEqual({ p: { a: [1] } });
      expect(values([{ name: "p", type }], { p: 3 })).toEqual({ p: 3 });
      const withOptions: PropDescription = { name: "p", type, options: ["a", "b"] };
      expect(values([withOptions], { p: "c" })).toEqual({ p: "c" });
    },
  );

  it("counts null as absent for an unlisted type, and as a value for any", () => {
    expect(issuesOf(() => validateConfiguredProps([{ name: "p", type: "sql" }], { p: null }))).toEqual([
      { field: "configured_props.p", message: "is required" },
    ]);
    expect(values([{ name: "p", type: "any" }], { p: null })).toEqual({ p: null });
  });

  it("checks nothing on the items of an array of a non-scalar type but unwraps their labels", () => {
    expect(values([{ name: "p", type: "object[]" }], { p: [1, "x", null] })).toEqual({ p: [1, "x", null] });
    expect(issuesOf(() => validateConfiguredProps([{ name: "p", type: "object[]" }], { p: {} }))).toEqual([
      { field: "configured_props.p", message: "must be an array of object values" },
    ]);
    const def: PropDescription = { name: "p", type: "sql[]", options: [{ label: "A", value: "a" }] };
    expect(values([def], { p: [{ __lv: { label: "A", value: "a" } }] })).toEqual({ p: ["a"] });
    expect(values([def], { p: ["a", "b"] })).toEqual({ p: ["a", "b"] });
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

  it("refuses a data store name with NUL or a bidirectional control character, naming the prop", () => {
    const defs: PropDescription[] = [{ name: "ds", type: "data_store" }];
    for (const name of ["inv\u202egpj.exe", "a\u0000b"]) {
      expect(issuesOf(() => validateConfiguredProps(defs, { ds: { name } }))).toEqual([
        { field: "configured_props.ds", message: expect.stringMatching(/NUL or bidirectional control characters/) },
      ]);
    }
    expect(values(defs, { ds: { name: " orders " } })).toEqual({ ds: { name: "orders" } });
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
      ds: { name: "k" },
    };
    expect(configuredPropsView(defs, stored, {})).toStrictEqual({ list: ["a"], typeless: 1, ds: { name: "k" } });
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

type TypeName = keyof typeof PROP_TYPES;

/** How one type treats a value: the table's own test data, one row per entry of the table. */
interface Sample {
  /** Attributes of the prop beside its name and type. */
  def?: Partial<PropDescription>;
  given: Json | undefined;
  /** What is stored; `"refused"` when even `given` is refused (a typeless prop). */
  stored: Json | undefined | "refused";
  view?: Json;
  run?: Json;
  /** A value the type refuses, with its message. */
  refused?: [Json, string];
}

// Typed by the table's keys, so an entry without a row here does not compile (and the walk
// below also fails at run time).
const SAMPLES: Record<TypeName, Sample> = {
  string: { given: "a", stored: "a", view: "a", run: "a", refused: [1, "must be a string"] },
  integer: { given: 3, stored: 3, view: 3, run: 3, refused: ["3", "must be an integer"] },
  boolean: { given: false, stored: false, view: false, run: false, refused: [0, "must be a boolean"] },
  "string[]": { given: ["a"], stored: ["a"], view: ["a"], run: ["a"], refused: [[1], "item 0: must be a string"] },
  "integer[]": { given: [1], stored: [1], view: [1], run: [1], refused: [[1.5], "item 0: must be an integer"] },
  "boolean[]": {
    given: [true],
    stored: [true],
    view: [true],
    run: [true],
    refused: [true, "must be an array of boolean values"],
  },
  object: { given: { a: 1 }, stored: { a: 1 }, view: { a: 1 }, run: { a: 1 }, refused: [[], "must be an object"] },
  // `any` refuses nothing: its options are choices only.
  any: {
    def: { options: [null, 1] },
    given: null,
    stored: null,
    view: null,
    run: null,
  },
  app: {
    def: { app: "slack" },
    given: { authProvisionId: "apn_1" },
    stored: { authProvisionId: "apn_1" },
    view: { authProvisionId: "apn_1" },
    run: { authProvisionId: "apn_1" },
    refused: [{ authProvisionId: "x" }, 'must be {"authProvisionId": "apn_..."}, a connected account'],
  },
  data_store: {
    given: { name: " orders " },
    stored: { name: "orders" },
    view: { name: "orders" },
    run: { name: "orders" },
    refused: [
      "ds",
      'must be a data store id ("ds_..."), or {"name": "..."} (1 to 128 characters) to use the workspace\'s store of that name',
    ],
  },
  http_request: {
    def: { default: { method: "POST" } },
    given: { url: "https://example.test/hook", headers: [{ name: "x-a", value: "1" }] },
    stored: { method: "POST", url: "https://example.test/hook", headers: [{ name: "x-a", value: "1" }] },
    view: { method: "POST", url: "https://example.test/hook", headers: [{ name: "x-a", value: "1" }] },
    run: { method: "POST", url: "https://example.test/hook", headers: [{ name: "x-a", value: "1" }] },
    refused: [{ url: "file:///etc/passwd" }, "url must be an http or https URL"],
  },
  alert: {
    def: { alertType: "info", content: "c" },
    given: undefined,
    stored: undefined,
    refused: ["x", "is an alert and takes no value"],
  },
  "$.interface.http": {
    def: { customResponse: true },
    given: { endpoint_url: "old" },
    stored: {},
    view: { endpoint_url: "http://127.0.0.1:4000/http/k" },
    run: { endpoint: "http://127.0.0.1:4000/http/k", customResponse: true },
    refused: ["x", "must be an object ({}) or absent"],
  },
  "$.interface.timer": {
    given: { intervalSeconds: 60 },
    stored: { intervalSeconds: 60 },
    view: { cron: null, interval_seconds: 60 },
    run: { type: "$.interface.timer", intervalSeconds: 60 },
    refused: [{}, "must be an object with intervalSeconds (whole seconds) or cron (a cron expression)"],
  },
  "$.service.db": {
    given: { type: "$.service.db" },
    stored: {},
    view: { type: "$.service.db" },
    run: { type: "$.service.db" },
    refused: [{ a: 1 }, "is a $.service.db and takes no value"],
  },
  // The registry's `syncDir`: nothing stored, shown or run (the step's /tmp is its sandbox's own).
  dir: {
    given: {},
    stored: undefined,
    refused: ["/tmp", "is a dir prop (the step's /tmp, made by Sluice) and takes no value"],
  },
  unknown: { given: 1, stored: "refused", view: 1, run: 1 },
};

/** The types of component-model.md's "Prop types" table, with the arrays it allows. */
const SPEC_TYPES = [
  "app",
  "boolean",
  "integer",
  "string",
  "boolean[]",
  "integer[]",
  "string[]",
  "object",
  "any",
  "$.interface.http",
  "$.interface.timer",
  "$.service.db",
  "data_store",
  "http_request",
  "alert",
];

const entries = Object.entries(PROP_TYPES) as [TypeName, PropType][];
const ctx = { endpointUrl: "http://127.0.0.1:4000/http/k" };

describe("the table of prop types", () => {
  it("has an entry for every type the spec lists, and a test row for every entry", () => {
    expect(Object.keys(PROP_TYPES)).toEqual(expect.arrayContaining(SPEC_TYPES));
    expect(Object.keys(SAMPLES).sort()).toEqual(Object.keys(PROP_TYPES).sort());
  });

  it.each(entries)("gives %s every function and flag", (_, type) => {
    expect(type.validate).toBeTypeOf("function");
    expect(type.view).toBeTypeOf("function");
    expect(type.runValue).toBeTypeOf("function");
    expect(type.record === undefined || typeof type.record === "function").toBe(true);
    expect(type.secretable).toBeTypeOf("boolean");
    expect(type.displayOnly).toBeTypeOf("boolean");
  });

  it.each(entries)("looks %s up as its own entry", (name, type) => {
    expect(propTypeOf(name)).toBe(type);
  });

  it.each(Object.entries(SAMPLES))("walks a %s prop from request to view and run", (name, sample) => {
    const def = { name: "p", type: name, ...sample.def } as PropDescription;
    if (sample.stored === "refused") {
      expect(() => validateConfiguredProps([def], { p: sample.given })).toThrow(/has no type/);
    } else {
      const validated = validateConfiguredProps([def], sample.given === undefined ? {} : { p: sample.given });
      expect(validated.values.p).toStrictEqual(sample.stored);
    }
    const stored = sample.stored === "refused" ? sample.given : sample.stored;
    const storedProps: Record<string, Json> = stored === undefined ? {} : { p: stored };
    expect(configuredPropsView([def], storedProps, ctx).p).toStrictEqual(sample.view);
    const run = runtimeProps([def], storedProps, ctx);
    expect(run.props.p).toStrictEqual(sample.run);
    expect(run.propTypes.p).toBe(propTypeOf(name).displayOnly ? undefined : name);
    if (sample.refused) {
      const [value, message] = sample.refused;
      expect(issuesOf(() => validateConfiguredProps([def], { p: value }))).toEqual([
        { field: "configured_props.p", message },
      ]);
    }
  });

  it("lets only strings be secret and only alerts be display-only", () => {
    expect(entries.filter(([, type]) => type.secretable).map(([name]) => name)).toEqual(["string"]);
    expect(entries.filter(([, type]) => type.displayOnly).map(([name]) => name)).toEqual(["alert"]);
  });

  it("refuses the typeless prop whatever it is given, absent included", () => {
    const unknown = propTypeOf("unknown");
    for (const given of [undefined, null, 1, "x", {}]) {
      expect(() => unknown.validate({ name: "p", type: "unknown" }, given, "configured_props.p")).toThrow(
        PropValueError,
      );
    }
  });

  it("gives types it does not list one entry for values and one for arrays, never Object's members", () => {
    const plain = propTypeOf("sql");
    expect(propTypeOf("constructor")).toBe(plain);
    expect(propTypeOf("__proto__")).toBe(plain);
    expect(propTypeOf("object[]")).toBe(propTypeOf("sql[]"));
    expect(propTypeOf("object[]")).not.toBe(plain);
    expect(Object.values(PROP_TYPES)).not.toContain(plain);
  });
});
