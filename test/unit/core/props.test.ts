import { describe, expect, it } from "vitest";
import { SEALED_SECRET } from "#core/component-model";
import type { Secrets } from "#core/ports/secrets";
import {
  configurablePropsView,
  configuredPropsView,
  expressionProps,
  mergeDynamicProps,
  openSecretValues,
  PROP_VALUE_MAX_BYTES,
  runtimeProps,
  sealSecretValues,
  slugify,
  validateConfiguredProps,
} from "#core/props";
import type { PropDescription } from "#runtime/protocol";
import { validationIssues as issuesOf } from "../../support/rejection.ts";

const values = (defs: PropDescription[], input: unknown) => validateConfiguredProps(defs, input).values;

describe("validateConfiguredProps: plain types", () => {
  it.each<[string, PropDescription, unknown]>([
    ["a boolean", { name: "p", type: "boolean" }, false],
    ["an integer", { name: "p", type: "integer" }, -3],
    ["an integer at min and max", { name: "p", type: "integer", min: 5, max: 5 }, 5],
    ["a string", { name: "p", type: "string" }, ""],
    ["a boolean array", { name: "p", type: "boolean[]" }, [true, false]],
    ["an integer array", { name: "p", type: "integer[]", min: 0 }, [0, 1]],
    ["a string array", { name: "p", type: "string[]" }, []],
    ["an object", { name: "p", type: "object" }, { a: [1, { b: null }] }],
    ["any array", { name: "p", type: "any" }, [1, "x", null]],
    ["any null", { name: "p", type: "any" }, null],
    ["a data store by id", { name: "p", type: "data_store" }, "ds_0123abc"],
    ["a data store by name", { name: "p", type: "data_store" }, { name: "orders" }],
    ["an http request", { name: "p", type: "http_request" }, { method: "GET", url: "https://x.test" }],
    ["an app-specific type", { name: "p", type: "$.airtable.baseId" }, "app123"],
    ["an app account", { name: "p", type: "app", app: "slack" }, { authProvisionId: "apn_abc" }],
  ])("accepts %s and stores it as given", (_, def, value) => {
    expect(values([def], { p: value })).toEqual({ p: value });
  });

  it.each<[string, PropDescription, unknown, string]>([
    ["a string for a boolean", { name: "p", type: "boolean" }, "true", "must be a boolean"],
    ["a fraction for an integer", { name: "p", type: "integer" }, 1.5, "must be an integer"],
    ["a numeric string for an integer", { name: "p", type: "integer" }, "1", "must be an integer"],
    ["an integer under min", { name: "p", type: "integer", min: 10 }, 9, "must be at least 10"],
    ["an integer over max", { name: "p", type: "integer", max: 10 }, 11, "must be at most 10"],
    ["a number for a string", { name: "p", type: "string" }, 1, "must be a string"],
    ["a string for a string array", { name: "p", type: "string[]" }, "a", "must be an array of string values"],
    ["a bad item of a string array", { name: "p", type: "string[]" }, ["a", 2], "item 1: must be a string"],
    ["an item over max", { name: "p", type: "integer[]", max: 3 }, [1, 4], "item 1: must be at most 3"],
    ["an array for an object", { name: "p", type: "object" }, [], "must be an object"],
    ...["ds", "sc_abc", { key: "ds" }, { name: "" }, { name: "x".repeat(129) }, { name: "x", id: "ds_1" }].map(
      (value): [string, PropDescription, unknown, string] => [
        `${JSON.stringify(value).slice(0, 20)} for a data store`,
        { name: "p", type: "data_store" },
        value,
        'must be a data store id ("ds_..."), or {"name": "..."} (1 to 128 characters) to use the workspace\'s store of that name',
      ],
    ),
    [
      "an app without account",
      { name: "p", type: "app", app: "slack" },
      {},
      'must be {"authProvisionId": "apn_..."}, a connected account',
    ],
    [
      "an app with a foreign id",
      { name: "p", type: "app" },
      { authProvisionId: "u_1" },
      'must be {"authProvisionId": "apn_..."}, a connected account',
    ],
  ])("refuses %s", (_, def, value, message) => {
    expect(issuesOf(() => validateConfiguredProps([def], { p: value }))).toEqual([
      { field: "configured_props.p", message },
    ]);
  });

  it("puts every problem in one error, each on its field, in a message naming them all", () => {
    const defs: PropDescription[] = [
      { name: "a", type: "integer" },
      { name: "b", type: "string" },
      { name: "c", type: "boolean" },
    ];
    let caught: unknown;
    try {
      validateConfiguredProps(defs, { a: "x", c: true, extra: 1 });
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({
      code: "validation",
      message:
        "configured_props.a: must be an integer; configured_props.b: is required; configured_props.extra: is not a prop of this component",
      issues: [
        { field: "configured_props.a", message: "must be an integer" },
        { field: "configured_props.b", message: "is required" },
        { field: "configured_props.extra", message: "is not a prop of this component" },
      ],
    });
  });

  it.each([[[]], ["x"], [3]])("refuses configured_props that is not an object (%j)", (input) => {
    expect(issuesOf(() => validateConfiguredProps([], input))).toEqual([
      { field: "configured_props", message: "must be an object keyed by prop name" },
    ]);
  });

  it("treats absent and null configured_props as none", () => {
    const defs: PropDescription[] = [{ name: "p", type: "string", optional: true }];
    expect(validateConfiguredProps(defs, undefined)).toEqual({ values: {}, secretNames: [], dbPropNames: [] });
    expect(validateConfiguredProps(defs, null).values).toEqual({});
  });

  it("keeps declaration order in values", () => {
    const defs: PropDescription[] = [
      { name: "z", type: "string" },
      { name: "a", type: "string" },
    ];
    expect(Object.keys(values(defs, { a: "1", z: "2" }))).toEqual(["z", "a"]);
  });
});

describe("validateConfiguredProps: required, optional, default", () => {
  it.each<[string, PropDescription, unknown, Record<string, unknown>]>([
    ["absent optional: no value", { name: "p", type: "string", optional: true }, {}, {}],
    ["absent with default: the default", { name: "p", type: "integer", optional: true, default: 7 }, {}, { p: 7 }],
    ["null with default: the default", { name: "p", type: "string", default: "d" }, { p: null }, { p: "d" }],
    ["given overrides default", { name: "p", type: "string", optional: true, default: "d" }, { p: "x" }, { p: "x" }],
    ["absent app: no value", { name: "p", type: "app", app: "github" }, {}, {}],
    ["absent data store: no value", { name: "p", type: "data_store" }, {}, {}],
    [
      "absent http request: its default",
      { name: "p", type: "http_request", default: { method: "GET" } },
      {},
      { p: { method: "GET" } },
    ],
    [
      "disabled and hidden props behave normally",
      { name: "p", type: "string", disabled: true, hidden: true, default: "d" },
      {},
      { p: "d" },
    ],
  ])("%s", (_, def, input, expected) => {
    expect(values([def], input)).toEqual(expected);
  });

  it.each<[string, PropDescription, unknown]>([
    ["absent", { name: "p", type: "string" }, {}],
    ["null", { name: "p", type: "boolean" }, { p: null }],
    ["absent array", { name: "p", type: "string[]" }, {}],
    ["absent any", { name: "p", type: "any" }, {}],
  ])("a required prop %s answers 'is required'", (_, def, input) => {
    expect(issuesOf(() => validateConfiguredProps([def], input))).toEqual([
      { field: "configured_props.p", message: "is required" },
    ]);
  });

  it("checks a default from the code like a given value and says so", () => {
    const def: PropDescription = { name: "p", type: "integer", max: 3, default: 9 };
    expect(issuesOf(() => validateConfiguredProps([def], {}))).toEqual([
      { field: "configured_props.p", message: "has an invalid default in the component code: must be at most 3" },
    ]);
  });
});

describe("validateConfiguredProps: options, labels, static", () => {
  const color: PropDescription = { name: "p", type: "string", options: ["red", { label: "Green", value: "green" }] };

  it.each([["red"], ["green"]])("accepts option %j, plain or {label, value}", (value) => {
    expect(values([color], { p: value })).toEqual({ p: value });
  });

  it("takes a value outside the static options: they are the drop-down's choices, as in the original", () => {
    // formatting-split-text: "Choose one of the options, or use a custom ... integer".
    const index: PropDescription = { name: "p", type: "integer", options: [{ label: "All", value: 999 }, 1, -1] };
    expect(values([color], { p: "Green" })).toEqual({ p: "Green" });
    expect(values([index], { p: 2 })).toEqual({ p: 2 });
  });

  it("still checks the type of a value with static options", () => {
    const def: PropDescription = { name: "p", type: "integer[]", options: [1, 2, { label: "three", value: 3 }] };
    expect(values([def], { p: [3, 4] })).toEqual({ p: [3, 4] });
    expect(issuesOf(() => validateConfiguredProps([def], { p: [1, "4"] }))).toEqual([
      { field: "configured_props.p", message: "item 1: must be an integer" },
    ]);
    expect(issuesOf(() => validateConfiguredProps([color], { p: 5 }))).toEqual([
      { field: "configured_props.p", message: "must be a string" },
    ]);
  });

  it("does not check values of props with remote options", () => {
    expect(values([{ name: "p", type: "string", remoteOptions: true }], { p: "anything" })).toEqual({ p: "anything" });
  });

  it.each([
    ["a single value", { __lv: { label: "Green", value: "green" } }, color, "green"],
    [
      "an array",
      {
        __lv: [
          { label: "One", value: 1 },
          { label: "Two", value: 2 },
        ],
      },
      { name: "p", type: "integer[]" },
      [1, 2],
    ],
    ["array items", [{ __lv: { label: "a", value: "a" } }, "b"], { name: "p", type: "string[]" }, ["a", "b"]],
  ] as const)("takes the value of %s stored with its label (__lv)", (_, input, def, expected) => {
    expect(values([def as PropDescription], { p: input })).toEqual({ p: expected });
  });

  it("validates the value inside a label wrapper", () => {
    expect(
      issuesOf(() => validateConfiguredProps([color], { p: { __lv: { label: "x", value: 7 } } }))[0]?.message,
    ).toMatch(/^must be a string/);
  });

  it("fixes a static prop to its static value and refuses another", () => {
    const def: PropDescription = { name: "method", type: "string", static: "GET" };
    expect(values([def], {})).toEqual({ method: "GET" });
    expect(values([def], { method: "GET" })).toEqual({ method: "GET" });
    expect(issuesOf(() => validateConfiguredProps([def], { method: "POST" }))).toEqual([
      { field: "configured_props.method", message: 'is static: its value is always "GET"' },
    ]);
  });
});

describe("validateConfiguredProps: special props", () => {
  it("marks secret string props and only those", () => {
    const defs: PropDescription[] = [
      { name: "token", type: "string", secret: true },
      { name: "spare", type: "string", secret: true, optional: true },
      { name: "list", type: "string[]", secret: true },
      { name: "plain", type: "string" },
    ];
    const result = validateConfiguredProps(defs, { token: "t", list: ["a"], plain: "p" });
    expect(result.secretNames).toEqual(["token"]);
    expect(result.values).toEqual({ token: "t", list: ["a"], plain: "p" });
  });

  it("ignores alert props and refuses a value for one", () => {
    const alert: PropDescription = { name: "note", type: "alert", alertType: "info", content: "Read me" };
    expect(values([alert], {})).toEqual({});
    expect(issuesOf(() => validateConfiguredProps([alert], { note: "x" }))).toEqual([
      { field: "configured_props.note", message: "is an alert and takes no value" },
    ]);
  });

  it("refuses an alert whose code gives an unknown alertType or no content, though it takes no value", () => {
    const defs: PropDescription[] = [
      { name: "typo", type: "alert", alertType: "danger", content: "Careful" },
      { name: "empty", type: "alert", alertType: "warning" },
      { name: "fine", type: "alert", alertType: "neutral", content: "**Markdown** is fine" },
    ];
    expect(issuesOf(() => validateConfiguredProps(defs, {}))).toEqual([
      {
        field: "configured_props.typo",
        message:
          'is an alert whose alertType must be one of info, neutral, warning, error (the component code gives "danger")',
      },
      {
        field: "configured_props.empty",
        message: "is an alert whose content must be a non-empty string in the component code",
      },
    ]);
  });

  it("checks an http_request value's fields and lays it over the code's default", () => {
    const def: PropDescription = { name: "req", type: "http_request", default: { method: "POST" } };
    expect(values([def], { req: { url: "http://127.0.0.1:9/x", params: { a: "1" } } })).toEqual({
      req: { method: "POST", url: "http://127.0.0.1:9/x", params: { a: "1" } },
    });
    expect(values([def], {})).toEqual({ req: { method: "POST" } });
    for (const [given, message] of [
      [{ url: 5 }, "url must be a string"],
      [{ url: "javascript:alert(1)" }, "url must be an http or https URL"],
      [{ url: "https://x.test", headers: "x-a: 1" }, "headers must be a list of {name, value} or an object"],
      [
        { url: "https://x.test", params: [{ value: "no name" }] },
        "params must be a list of {name, value} or an object",
      ],
      [{ url: "https://x.test", auth: "basic" }, "auth must be an object"],
    ] as const) {
      expect(issuesOf(() => validateConfiguredProps([def], { req: given }))).toEqual([
        { field: "configured_props.req", message },
      ]);
    }
  });

  it("refuses a prop the code gave no type", () => {
    const defs: PropDescription[] = [{ name: "broken", type: "unknown", optional: true }];
    expect(issuesOf(() => validateConfiguredProps(defs, {}))[0]).toMatchObject({
      field: "configured_props.broken",
      message: expect.stringMatching(/^has no type/),
    });
  });

  it("refuses a value over 64 KB and accepts one at the limit", () => {
    const def: PropDescription = { name: "p", type: "string" };
    const atLimit = "x".repeat(PROP_VALUE_MAX_BYTES - 2); // plus two quotes
    expect(values([def], { p: atLimit })).toEqual({ p: atLimit });
    const over = `${atLimit}é`; // two bytes in UTF-8
    expect(issuesOf(() => validateConfiguredProps([def], { p: over }))).toEqual([
      {
        field: "configured_props.p",
        message: `is ${PROP_VALUE_MAX_BYTES + 2} bytes as JSON; a prop value may be at most 65536 bytes`,
      },
    ]);
  });

  it.each([[undefined], [{}], [{ endpoint_url: "http://old/x" }]])(
    "stores an http interface as {} when given %j",
    (value) => {
      const def: PropDescription = { name: "http", type: "$.interface.http", customResponse: true };
      const result = validateConfiguredProps([def], value === undefined ? {} : { http: value });
      expect(result.values).toEqual({ http: {} });
      expect(result.http).toEqual({ propName: "http", customResponse: true });
    },
  );

  it("reports customResponse false when the http prop does not set it", () => {
    expect(validateConfiguredProps([{ name: "h", type: "$.interface.http" }], {}).http).toEqual({
      propName: "h",
      customResponse: false,
    });
  });

  it("refuses an http interface value that is not an object", () => {
    expect(issuesOf(() => validateConfiguredProps([{ name: "h", type: "$.interface.http" }], { h: "x" }))).toEqual([
      { field: "configured_props.h", message: "must be an object ({}) or absent" },
    ]);
  });

  it.each([[undefined], [{}], [{ type: "$.service.db" }]])("stores a db as {} when given %j", (value) => {
    const result = validateConfiguredProps(
      [{ name: "db", type: "$.service.db" }],
      value === undefined ? {} : { db: value },
    );
    expect(result.values).toEqual({ db: {} });
    expect(result.dbPropNames).toEqual(["db"]);
  });

  it("refuses a value for a db", () => {
    expect(issuesOf(() => validateConfiguredProps([{ name: "db", type: "$.service.db" }], { db: { a: 1 } }))).toEqual([
      { field: "configured_props.db", message: "is a $.service.db and takes no value" },
    ]);
  });

  it("refuses a second timer or http prop", () => {
    const defs: PropDescription[] = [
      { name: "t1", type: "$.interface.timer", default: { intervalSeconds: 60 } },
      { name: "t2", type: "$.interface.timer", default: { intervalSeconds: 60 } },
      { name: "h1", type: "$.interface.http" },
      { name: "h2", type: "$.interface.http" },
    ];
    expect(issuesOf(() => validateConfiguredProps(defs, {})).map((issue) => issue.field)).toEqual([
      "configured_props.t2",
      "configured_props.h2",
    ]);
  });
});

describe("validateConfiguredProps: timer", () => {
  const timer = (extra: Partial<PropDescription> = {}): PropDescription => ({
    name: "timer",
    type: "$.interface.timer",
    ...extra,
  });

  it.each<[string, PropDescription, unknown, Record<string, unknown>]>([
    ["an interval", timer(), { intervalSeconds: 60 }, { intervalSeconds: 60 }],
    [
      "a cron with zone",
      timer(),
      { cron: "0 9 * * 1", timezone: "Europe/Paris" },
      { cron: "0 9 * * 1", timezone: "Europe/Paris" },
    ],
    ["the default when absent", timer({ default: { intervalSeconds: 900 } }), undefined, { intervalSeconds: 900 }],
    [
      "the given value over the default",
      timer({ default: { intervalSeconds: 900 } }),
      { cron: "*/5 * * * *" },
      { cron: "*/5 * * * *" },
    ],
    ["the read-back form", timer(), { cron: null, interval_seconds: 120 }, { intervalSeconds: 120 }],
  ])("accepts %s", (_, def, input, expected) => {
    const result = validateConfiguredProps([def], input === undefined ? {} : { timer: input });
    expect(result.values).toEqual({ timer: expected });
    expect(result.timer).toEqual(expected);
  });

  it("requires a value when the timer has no default", () => {
    expect(issuesOf(() => validateConfiguredProps([timer()], {}))).toEqual([
      { field: "configured_props.timer", message: "is required: give {intervalSeconds} or {cron, timezone?}" },
    ]);
  });

  it.each([
    [{}, "configured_props.timer"],
    [{ intervalSeconds: 0 }, "configured_props.timer.intervalSeconds"],
    [{ cron: "not a cron" }, "configured_props.timer.cron"],
    [{ intervalSeconds: 60, cron: "* * * * *" }, "configured_props.timer"],
  ])("refuses %j on %s, with the other props' problems", (value, field) => {
    const issues = issuesOf(() =>
      validateConfiguredProps([timer(), { name: "other", type: "integer" }], { timer: value, other: "x" }),
    );
    expect(issues.map((issue) => issue.field)).toEqual([field, "configured_props.other"]);
  });
});

describe("mergeDynamicProps", () => {
  const staticDefs: PropDescription[] = [
    { name: "a", type: "string", label: "A" },
    { name: "b", type: "integer" },
  ];

  it("adds dynamic props after the static ones", () => {
    const merged = mergeDynamicProps(staticDefs, [{ name: "c", type: "boolean" }]);
    expect(merged.map((def) => def.name)).toEqual(["a", "b", "c"]);
  });

  it("lets a dynamic prop of the same name change only disabled and hidden", () => {
    const merged = mergeDynamicProps(staticDefs, [
      { name: "a", type: "integer", label: "changed", disabled: true, hidden: false },
    ]);
    expect(merged).toEqual([
      { name: "a", type: "string", label: "A", disabled: true, hidden: false },
      { name: "b", type: "integer" },
    ]);
    expect(staticDefs[0]).toEqual({ name: "a", type: "string", label: "A" });
  });

  it("keeps static props when additionalProps returns nothing", () => {
    expect(mergeDynamicProps(staticDefs, [])).toEqual(staticDefs);
  });
});

describe("configurablePropsView", () => {
  it("echoes the attributes the code set, and only those", () => {
    const defs: PropDescription[] = [
      { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 900 } },
      { name: "http", type: "$.interface.http", customResponse: true },
      { name: "github", type: "app", app: "github" },
      {
        name: "repo",
        type: "string",
        label: "Repository",
        description: "Pick one",
        optional: true,
        remoteOptions: true,
        useQuery: true,
        reloadProps: true,
        disabled: false,
        hidden: true,
      },
      { name: "n", type: "integer", min: 1, max: 5, options: [1, { label: "two", value: 2 }] },
      { name: "note", type: "alert", alertType: "warning", content: "Careful" },
      { name: "method", type: "string", static: "GET" },
    ];
    // A description stored by an older Sluice may carry attributes no longer echoed.
    const stale = { name: "legacy", type: "string", label: "Legacy", propDefinition: ["github", "repo"] };
    expect(configurablePropsView([...defs, stale as PropDescription])).toStrictEqual([
      ...defs,
      { name: "legacy", type: "string", label: "Legacy" },
    ]);
  });

  it("never echoes the default or static value of a secret prop", () => {
    const view = configurablePropsView([
      { name: "token", type: "string", secret: true, optional: true, default: "hunter2" },
      { name: "key", type: "string", secret: true, static: "s3cr3t" },
    ]);
    expect(view).toEqual([
      { name: "token", type: "string", secret: true, optional: true },
      { name: "key", type: "string", secret: true },
    ]);
    expect(JSON.stringify(view)).not.toMatch(/hunter2|s3cr3t/);
  });
});

describe("configuredPropsView", () => {
  const defs: PropDescription[] = [
    { name: "timer", type: "$.interface.timer" },
    { name: "http", type: "$.interface.http" },
    { name: "db", type: "$.service.db" },
    { name: "token", type: "string", secret: true },
    { name: "repo", type: "string" },
    { name: "note", type: "alert", alertType: "info", content: "x" },
    { name: "gh", type: "app", app: "github" },
  ];
  const stored = {
    timer: { intervalSeconds: 60 },
    http: {},
    db: {},
    token: { [SEALED_SECRET]: "v1.sealed" },
    repo: "octo/cat",
    gh: { authProvisionId: "apn_1" },
  };

  it("reads interface props back in the spec's shape and never returns a secret", () => {
    const view = configuredPropsView(defs, stored, {
      endpointUrl: "http://127.0.0.1:4000/http/k",
      timer: { intervalSeconds: 60 },
    });
    expect(view).toEqual({
      timer: { cron: null, interval_seconds: 60 },
      http: { endpoint_url: "http://127.0.0.1:4000/http/k" },
      db: { type: "$.service.db" },
      repo: "octo/cat",
      gh: { authProvisionId: "apn_1" },
    });
    expect(JSON.stringify(view)).not.toContain("sealed");
  });

  it("reads a cron timer with its zone, from the stored value when the context has none", () => {
    const view = configuredPropsView(defs, { ...stored, timer: { cron: "0 * * * *", timezone: "Asia/Tokyo" } }, {});
    expect(view.timer).toEqual({ cron: "0 * * * *", interval_seconds: null, timezone: "Asia/Tokyo" });
    expect(view.http).toEqual({ endpoint_url: null });
  });

  it("keeps stored values of props no longer defined, except sealed ones", () => {
    const view = configuredPropsView([], { old: 1, oldSecret: { [SEALED_SECRET]: "v1.x" } }, {});
    expect(view).toEqual({ old: 1 });
  });
});

/** Reversible and visibly different from the plaintext, like a real cipher. */
const fakeSecrets: Secrets = {
  seal: async (plaintext) => `sealed:${[...plaintext].reverse().join("")}`,
  open: async (sealed) => {
    if (!sealed.startsWith("sealed:")) throw new Error("tampered");
    return [...sealed.slice("sealed:".length)].reverse().join("");
  },
};

describe("sealing secret values", () => {
  it("seals only the named secrets and opens them back", async () => {
    const stored = await sealSecretValues(fakeSecrets, { token: "abc", repo: "octo/cat", n: 1 }, ["token"]);
    expect(stored).toEqual({ token: { [SEALED_SECRET]: "sealed:cba" }, repo: "octo/cat", n: 1 });
    expect(await openSecretValues(fakeSecrets, stored)).toEqual({ token: "abc", repo: "octo/cat", n: 1 });
  });

  it("does not mistake an object with more keys for a sealed value", async () => {
    const stored = { obj: { [SEALED_SECRET]: "x", other: 1 } };
    expect(await openSecretValues(fakeSecrets, stored)).toEqual(stored);
  });

  it("opens all sealed values at once, keeping the props in order", async () => {
    let inFlight = 0;
    let mostInFlight = 0;
    const slowSecrets: Secrets = {
      seal: fakeSecrets.seal,
      open: async (sealed) => {
        mostInFlight = Math.max(mostInFlight, ++inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight -= 1;
        return fakeSecrets.open(sealed);
      },
    };
    const stored = await sealSecretValues(slowSecrets, { a: "one", plain: 0, b: "two" }, ["a", "b"]);
    const opened = await openSecretValues(slowSecrets, stored);
    expect(Object.entries(opened)).toEqual([
      ["a", "one"],
      ["plain", 0],
      ["b", "two"],
    ]);
    expect(mostInFlight).toBe(2);
  });

  it("fails when a sealed value cannot be opened", async () => {
    await expect(openSecretValues(fakeSecrets, { token: { [SEALED_SECRET]: "garbage" } })).rejects.toThrow("tampered");
  });
});

describe("runtimeProps", () => {
  it("gives interface props their runtime shape and other props their values", () => {
    const defs: PropDescription[] = [
      { name: "http", type: "$.interface.http", customResponse: true },
      { name: "timer", type: "$.interface.timer" },
      { name: "db", type: "$.service.db" },
      { name: "token", type: "string", secret: true },
      { name: "gh", type: "app", app: "github" },
      { name: "unset", type: "string", optional: true },
      { name: "note", type: "alert", alertType: "info", content: "x" },
    ];
    const out = runtimeProps(
      defs,
      { http: {}, timer: { cron: "0 * * * *" }, db: {}, token: "opened" },
      { endpointUrl: "http://127.0.0.1:4000/http/k", timer: { intervalSeconds: 30 } },
    );
    expect(out.props).toEqual({
      http: { endpoint: "http://127.0.0.1:4000/http/k", customResponse: true },
      timer: { type: "$.interface.timer", intervalSeconds: 30 },
      db: { type: "$.service.db" },
      token: "opened",
    });
    expect(out.propTypes).toEqual({
      http: "$.interface.http",
      timer: "$.interface.timer",
      db: "$.service.db",
      token: "string",
      gh: "app",
      unset: "string",
    });
  });

  it("falls back to the stored timer and customResponse false", () => {
    const out = runtimeProps(
      [
        { name: "t", type: "$.interface.timer" },
        { name: "h", type: "$.interface.http" },
      ],
      { t: { cron: "0 * * * *", timezone: "UTC" } },
      {},
    );
    expect(out.props).toEqual({
      t: { type: "$.interface.timer", cron: "0 * * * *", timezone: "UTC" },
      h: { endpoint: null, customResponse: false },
    });
  });
});

describe("slugify", () => {
  it.each([
    ["My Source", "my-source"],
    ["  --Hello,   World!!  ", "hello-world"],
    ["Café Crème 2", "cafe-creme-2"],
    ["github-new-review-request", "github-new-review-request"],
    ["UPPER_snake_case", "upper-snake-case"],
    ["日本語", "source"],
    ["", "source"],
    ["!!!", "source"],
  ])("%j → %j", (name, slug) => {
    expect(slugify(name)).toBe(slug);
  });

  it("keeps at most 64 characters and never ends in a dash", () => {
    const slug = slugify(`${"a".repeat(63)} bcd`);
    expect(slug).toBe("a".repeat(63));
    expect(slugify("x".repeat(100))).toHaveLength(64);
  });
});

describe("expressionProps: the props whose {{ ... }} expressions a step's runtime evaluates", () => {
  const defs: PropDescription[] = [
    { name: "plain", type: "string" },
    { name: "count", type: "integer" },
    { name: "body", type: "object" },
    { name: "token", type: "string", secret: true },
    { name: "fixed", type: "string", static: "{{1}}" },
    { name: "account", type: "app", app: "github" },
    { name: "quiet", type: "string" },
  ];

  it("names plain props holding one, at any depth; never a secret, a static or a structured prop", () => {
    const values = {
      plain: "hi {{steps.a.name}}",
      count: "{{steps.a.n}}",
      body: { deep: ["x", "{{steps.a.id}}"] },
      token: "pw{{secret}}",
      fixed: "{{1}}",
      account: { authProvisionId: "{{x}}" },
      quiet: "no braces",
    };
    expect(expressionProps(defs, values)).toEqual(["plain", "count", "body"]);
    expect(expressionProps(defs, { quiet: "{x}" })).toBeUndefined();
  });

  it("refuses a secret given as one expression (its text would be the secret), and takes one that only holds braces", () => {
    const secret = defs.slice(3, 4);
    expect(
      issuesOf(() =>
        validateConfiguredProps(secret, { token: " {{process.env.TOKEN}} " }, "steps[0].props", { expressions: true }),
      ),
    ).toEqual([
      {
        field: "steps[0].props.token",
        message: expect.stringMatching(
          /^is a secret prop, whose value is taken as written: expressions are not evaluated/,
        ),
      },
    ]);
    expect(
      validateConfiguredProps(secret, { token: "pw{{x}}!" }, "steps[0].props", { expressions: true }).values,
    ).toEqual({ token: "pw{{x}}!" });
  });

  it("takes an expression for an integer at validation only where expressions are taken (steps)", () => {
    expect(
      validateConfiguredProps(defs.slice(1, 2), { count: "{{steps.a.n}}" }, "steps[0].props", { expressions: true })
        .values,
    ).toEqual({
      count: "{{steps.a.n}}",
    });
    expect(issuesOf(() => validateConfiguredProps(defs.slice(1, 2), { count: "{{steps.a.n}}" }))).toEqual([
      { field: "configured_props.count", message: "must be an integer" },
    ]);
    // A megabyte of `{` is read once, and refused for its size.
    expect(
      issuesOf(() =>
        validateConfiguredProps(defs.slice(0, 1), { plain: "{".repeat(1024 * 1024) }, "steps[0].props", {
          expressions: true,
        }),
      )[0]?.message,
    ).toMatch(/a prop value may be at most/);
  });
});
