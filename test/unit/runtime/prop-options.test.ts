import { describe, expect, it } from "vitest";
import type { Invocation, Json } from "#runtime/protocol";
import { parseInvocation, parseInvocationResult } from "#runtime/protocol-parsers";
import { runInvocation } from "#runtime/run-invocation";

let counter = 0;

function optionsInvocation(event: Record<string, Json>, props: Record<string, Json> = {}): Invocation {
  counter += 1;
  return {
    invocationId: `inv_${counter}`,
    kind: "propOptions",
    sourceId: "dc_probe",
    props,
    propTypes: Object.fromEntries(Object.keys(props).map((name) => [name, "string"])),
    db: {},
    event,
    timeoutMs: 2000,
  };
}

/** An app in the registry's shape: propDefinitions whose options call the app's own methods. */
const gitApp = {
  type: "app",
  app: "git",
  propDefinitions: {
    branch: {
      type: "string",
      async options(this: any, { page, repo }: { page: number; repo: string }) {
        return this.listBranches(repo, page);
      },
    },
  },
  methods: {
    listBranches(this: any, repo: string, page: number) {
      return [`${repo}@${page}`, `auth:${JSON.stringify(this.$auth)}`];
    },
  },
};

describe("runInvocation: propOptions", () => {
  it("calls a propDefinition's options with this the app and inputValues from the configured props", async () => {
    const component = {
      props: {
        git: gitApp,
        repo: { type: "string" },
        branch: { propDefinition: [gitApp, "branch", (c: { repo: string }) => ({ repo: c.repo })] },
      },
    };
    const result = await runInvocation(
      component,
      optionsInvocation({ prop: "branch", page: 2, prevContext: {} }, { repo: "octo/alpha" }),
    );
    expect(result.error).toBeUndefined();
    expect(result.propOptions).toEqual(["octo/alpha@2", "auth:{}"]);
  });

  it("binds the app with an empty $auth when no prop of the component declares it", async () => {
    const component = { props: { branch: { propDefinition: [gitApp, "branch", { repo: "fixed" }] } } };
    const result = await runInvocation(component, optionsInvocation({ prop: "branch", page: 0, prevContext: {} }));
    expect(result.propOptions).toEqual(["fixed@0", "auth:{}"]);
  });

  it("calls the component's own options with this the component, page, prevContext and query", async () => {
    const component = {
      props: {
        prefix: { type: "string" },
        tag: {
          type: "string",
          useQuery: true,
          async options(this: any, argument: unknown) {
            return { options: [this.prefix], context: { seen: argument } };
          },
        },
      },
    };
    const event = { prop: "tag", page: 1, prevContext: { nextPageToken: "t" }, query: "q" };
    const result = await runInvocation(component, optionsInvocation(event, { prefix: "v" }));
    expect(result.propOptions).toEqual({
      options: ["v"],
      context: { seen: { page: 1, prevContext: { nextPageToken: "t" }, query: "q" } },
    });
  });

  it("finds a prop additionalProps returned, and answers static options as they are", async () => {
    const component = {
      props: { fixed: { type: "string", options: ["a", { label: "B", value: "b" }] } },
      async additionalProps(this: any) {
        return { dynamic: { type: "string", options: async () => [this.fixed] } };
      },
    };
    const dynamic = await runInvocation(
      component,
      optionsInvocation({ prop: "dynamic", page: 0, prevContext: {} }, { fixed: "a" }),
    );
    expect(dynamic.propOptions).toEqual(["a"]);
    const fixed = await runInvocation(component, optionsInvocation({ prop: "fixed", page: 0, prevContext: {} }));
    expect(fixed.propOptions).toEqual(["a", { label: "B", value: "b" }]);
  });

  it("answers what options returned as JSON only (functions dropped), and errors for what cannot run", async () => {
    const component = {
      props: {
        odd: { type: "string", options: async () => [() => 1, { label: "x", value: "x", extra: () => 2 }] },
        none: { type: "string" },
        bare: "string",
      },
    };
    const odd = await runInvocation(component, optionsInvocation({ prop: "odd", page: 0, prevContext: {} }));
    expect(odd.propOptions).toEqual([null, { label: "x", value: "x" }]);
    const none = await runInvocation(component, optionsInvocation({ prop: "none", page: 0, prevContext: {} }));
    expect(none.error).toMatchObject({ name: "TypeError", message: 'the prop "none" has no options' });
    const bare = await runInvocation(component, optionsInvocation({ prop: "bare", page: 0, prevContext: {} }));
    expect(bare.error?.message).toBe('the prop "bare" has no options');
    const missing = await runInvocation(component, optionsInvocation({ prop: "gone", page: 0, prevContext: {} }));
    expect(missing.error?.message).toBe('"gone" is not a prop of this component');
  });

  it("crosses the protocol: the kind is accepted and the answer parsed back", async () => {
    const invocation = optionsInvocation({ prop: "a", page: 0, prevContext: {} });
    expect(parseInvocation(JSON.parse(JSON.stringify(invocation)))).toMatchObject({ ok: true });
    const result = await runInvocation({ props: { a: { type: "string", options: ["x"] } } }, invocation);
    const parsed = parseInvocationResult(JSON.parse(JSON.stringify(result)), invocation.invocationId);
    expect(parsed).toMatchObject({ ok: true, value: { propOptions: ["x"] } });
  });
});
