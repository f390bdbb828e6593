import { describe, expect, it } from "vitest";
import { describeComponent, UNKNOWN_PROP_TYPE } from "#runtime/describe-component";

const github = {
  type: "app",
  app: "github",
  propDefinitions: {
    repo: {
      type: "string",
      label: "Repository",
      description: "The repository",
      async options() {
        return [];
      },
    },
  },
  methods: {
    client() {},
  },
};

describe("describeComponent", () => {
  it("reads the top-level metadata, hooks, methods and run of a source", () => {
    const description = describeComponent({
      key: "http-new-requests",
      name: "New Requests",
      version: "0.1.2",
      description: "Emits each request",
      dedupe: "unique",
      hooks: { async deploy() {}, async activate() {}, notAHook() {} },
      methods: { emitEvent() {}, helper: () => 1, constant: 3 },
      async run() {},
    });
    expect(description).toEqual({
      key: "http-new-requests",
      name: "New Requests",
      version: "0.1.2",
      description: "Emits each request",
      dedupe: "unique",
      type: "source",
      hooks: ["deploy", "activate"],
      methods: ["emitEvent", "helper"],
      hasRun: true,
      hasAdditionalProps: false,
      props: [],
    });
  });

  it("treats a component without type as a source and reports an action's type", () => {
    expect(describeComponent({ name: "s" }).type).toBe("source");
    expect(describeComponent({ name: "a", type: "action", async additionalProps() {} })).toMatchObject({
      type: "action",
      hasRun: false,
      hasAdditionalProps: true,
    });
  });

  it("keeps declaration order through spreads of shared objects", () => {
    const common = {
      props: { db: "$.service.db", http: { type: "$.interface.http", customResponse: true } },
      methods: { shared() {} },
    };
    const description = describeComponent({
      ...common,
      props: { ...common.props, secret: "string", limit: { type: "integer" } },
      methods: { ...common.methods, own() {} },
    });
    expect(description.props).toEqual([
      { name: "db", type: "$.service.db" },
      { name: "http", type: "$.interface.http", customResponse: true },
      { name: "secret", type: "string" },
      { name: "limit", type: "integer" },
    ]);
    expect(description.methods).toEqual(["shared", "own"]);
  });

  it("ignores unknown top-level keys and unknown prop attributes", () => {
    const description = describeComponent({
      name: "x",
      sampleEmit: { id: 1 },
      somethingElse: () => 1,
      props: { method: { type: "string", static: "GET", withLabel: true } },
    });
    expect(description).not.toHaveProperty("sampleEmit");
    expect(description.props).toEqual([{ name: "method", type: "string", static: "GET" }]);
  });

  it("keeps label, description, default, optional, secret, min, max and static options", () => {
    const [token, count, color] = describeComponent({
      props: {
        token: { type: "string", label: "Token", description: "API token", secret: true, optional: false },
        count: { type: "integer", min: 1, max: 10, default: 5, optional: true },
        color: {
          type: "string",
          options: ["red", { label: "Blue", value: "blue" }],
          reloadProps: true,
          disabled: false,
          hidden: true,
        },
      },
    }).props;
    expect(token).toEqual({
      name: "token",
      type: "string",
      label: "Token",
      description: "API token",
      secret: true,
      optional: false,
    });
    expect(count).toEqual({ name: "count", type: "integer", min: 1, max: 10, default: 5, optional: true });
    expect(color).toEqual({
      name: "color",
      type: "string",
      options: ["red", { label: "Blue", value: "blue" }],
      reloadProps: true,
      disabled: false,
      hidden: true,
    });
  });

  it("reports an options method as remoteOptions, with useQuery", () => {
    const [prop] = describeComponent({
      props: { channel: { type: "string", useQuery: true, async options() {} } },
    }).props;
    expect(prop).toEqual({ name: "channel", type: "string", useQuery: true, remoteOptions: true });
  });

  it("reports an app prop by its slug only", () => {
    const [prop] = describeComponent({ props: { github } }).props;
    expect(prop).toEqual({ name: "github", type: "app", app: "github" });
  });

  it("reports the $auth fields an app's functions and the component's code read", () => {
    const slack = {
      type: "app",
      app: "slack",
      propDefinitions: {
        channel: {
          type: "string",
          async options(this: any) {
            // biome-ignore lint/complexity/useLiteralKeys: the bracket form is what is under test
            return this.$auth?.["team_id"] ? [] : [];
          },
        },
      },
      methods: {
        _headers(this: any) {
          return { Authorization: `Bearer ${this.$auth.oauth_access_token}` };
        },
        _client(this: any) {
          const { domain, api_key: key } = this.$auth;
          return { domain, key };
        },
        _keys(this: any) {
          return Object.keys(this.$auth);
        },
      },
    };
    const description = describeComponent({
      props: {
        slack,
        other: {
          type: "app",
          app: "schedule",
          methods: {
            keys(this: any) {
              return Object.keys(this.$auth);
            },
          },
        },
      },
      methods: {
        signingSecret(this: any) {
          return this.slack.$auth.signing_secret;
        },
      },
      async run() {},
    });
    expect(description.props).toEqual([
      {
        name: "slack",
        type: "app",
        app: "slack",
        authFields: ["api_key", "domain", "oauth_access_token", "signing_secret", "team_id"],
      },
      { name: "other", type: "app", app: "schedule" },
    ]);
  });

  it("resolves a propDefinition against the app object, the prop's own attributes winning", () => {
    const description = describeComponent({
      props: {
        github,
        repo: { propDefinition: [github, "repo"], label: "Which repository", optional: true },
      },
    });
    expect(description.props[1]).toEqual({
      name: "repo",
      type: "string",
      label: "Which repository",
      description: "The repository",
      optional: true,
      remoteOptions: true,
    });
  });

  it("leaves a prop with an unresolvable propDefinition without a known type", () => {
    const [prop] = describeComponent({ props: { repo: { propDefinition: [github, "missing"] } } }).props;
    expect(prop).toEqual({ name: "repo", type: UNKNOWN_PROP_TYPE });
  });

  it("reports a timer's default, and a legacy timer's intervalSeconds as its default", () => {
    const props = describeComponent({
      props: {
        modern: { type: "$.interface.timer", default: { intervalSeconds: 900 } },
        legacy: { type: "$.interface.timer", intervalSeconds: 60 },
        cron: { type: "$.interface.timer", default: { cron: "0 0 * * *" } },
      },
    }).props;
    expect(props).toEqual([
      { name: "modern", type: "$.interface.timer", default: { intervalSeconds: 900 } },
      { name: "legacy", type: "$.interface.timer", default: { intervalSeconds: 60 } },
      { name: "cron", type: "$.interface.timer", default: { cron: "0 0 * * *" } },
    ]);
  });

  it("drops functions and cycles so the description is plain JSON", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const description = describeComponent({
      props: {
        request: { type: "http_request", default: { method: "GET", url: "https://x", sign: () => 1 } },
        obj: { type: "object", default: cyclic },
        list: { type: "string[]", default: ["a", () => 1] },
        alert: { type: "alert", alertType: "info", content: "Read *this*" },
      },
    });
    expect(JSON.parse(JSON.stringify(description))).toEqual(description);
    expect(description.props).toEqual([
      { name: "request", type: "http_request", default: { method: "GET", url: "https://x" } },
      { name: "obj", type: "object", default: { a: 1 } },
      { name: "list", type: "string[]", default: ["a", null] },
      { name: "alert", type: "alert", alertType: "info", content: "Read *this*" },
    ]);
  });

  it("rejects a module whose export is not a component object", () => {
    expect(() => describeComponent(undefined)).toThrow(/no default export/);
    expect(() => describeComponent(() => 1)).toThrow(/component object/);
  });
});
