import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import { createComponent } from "#core/components";
import { configureComponentProp, reloadComponentProps } from "#core/dynamic-props";
import type { SourceCode } from "#core/ports/component-host";
import { accountIn, memoryDeps, type Script, scriptedHost } from "../../support/memory-deps.ts";

/**
 * The trusted side of the configure and props endpoints against a scripted host: what the probe
 * asks (kind, request, props), what it needs no code for, and how its answers are read. The real
 * sandbox runs in test/e2e/dynamic-props.test.ts.
 */
async function setUp(description: Partial<ComponentDescription>, script: Script = async () => ({})) {
  const { host, calls } = scriptedHost(description, script);
  const prepared: SourceCode[] = [];
  const deps = memoryDeps(Date.now(), {
    host: { ...host, prepare: async (source) => void prepared.push(source) },
    registry: { readCode: async () => undefined, readTemplate: async () => undefined },
  });
  const account = await accountIn(deps, "configurer");
  const caller = { userId: account.user.id };
  const component = await createComponent(deps, caller, { component_code: "export default {}" });
  return { deps, calls, prepared, caller, componentId: component.id };
}

const PROPS: ComponentDescription["props"] = [
  { name: "limit", type: "integer" },
  { name: "repo", type: "string", remoteOptions: true },
  { name: "token", type: "string", secret: true },
];

describe("configureComponentProp", () => {
  it("asks the probe for one page with the configured props, leniently checked, and reads its answer", async () => {
    const { deps, calls, prepared, caller, componentId } = await setUp({ props: PROPS }, async () => ({
      propOptions: { options: [{ label: "A", value: "a" }], context: { next: "2" } },
      logs: [{ ts: 5, level: "info", message: "listed" }],
    }));
    const answer = await configureComponentProp(deps, caller, {
      id: componentId,
      prop_name: "repo",
      page: 1,
      prev_context: { next: "1" },
      query: "al",
      // `limit` is required and absent: still configuring. `col_1` is no static prop: maybe a dynamic one.
      configured_props: { token: "s3cret", col_1: "x" },
    });
    expect(answer).toEqual({
      options: [{ label: "A", value: "a" }],
      stringOptions: null,
      context: { next: "2" },
      errors: [],
      observations: [{ k: "console.info", msg: "listed", ts: 5 }],
    });
    const [invocation] = calls;
    expect(invocation).toMatchObject({
      kind: "propOptions",
      event: { prop: "repo", page: 1, prevContext: { next: "1" }, query: "al", previousPropDefs: PROPS },
      props: { token: "s3cret", col_1: "x" },
      db: {},
    });
    expect(prepared.map((source) => source.sourceId)).toEqual([invocation?.sourceId]);
  });

  it("runs every probe of a component in a workspace under one id that is no real source's", async () => {
    const { deps, calls, caller, componentId } = await setUp({ props: PROPS }, async () => ({ propOptions: [] }));
    await configureComponentProp(deps, caller, { id: componentId, prop_name: "repo" });
    await configureComponentProp(deps, caller, { id: componentId, prop_name: "repo", page: 1 });
    expect(calls[0]?.sourceId).toMatch(/^dc_0{10}/);
    expect(calls[1]?.sourceId).toBe(calls[0]?.sourceId);
  });

  it("refuses a configured value of the wrong type, naming it", async () => {
    const { deps, calls, caller, componentId } = await setUp({ props: PROPS });
    await expect(
      configureComponentProp(deps, caller, { id: componentId, prop_name: "repo", configured_props: { limit: "ten" } }),
    ).rejects.toMatchObject({ code: "validation", issues: [{ field: "configured_props.limit" }] });
    expect(calls).toEqual([]);
  });

  it("refuses a __proto__ key of configured_props as no prop", async () => {
    const { deps, calls, caller, componentId } = await setUp({ props: PROPS });
    const configured_props = JSON.parse('{"__proto__": {"polluted": true}}');
    await expect(
      configureComponentProp(deps, caller, { id: componentId, prop_name: "repo", configured_props }),
    ).rejects.toMatchObject({ code: "validation", issues: [{ field: "configured_props.__proto__" }] });
    expect(calls).toEqual([]);
  });

  it("answers a refused result and a failed probe in errors", async () => {
    let answer: unknown = ["a", null];
    const { deps, caller, componentId } = await setUp({ props: PROPS }, async () =>
      answer === "fail"
        ? { error: { name: "TimeoutError", message: "the invocation timed out after 3s", ts: 9 } }
        : { propOptions: answer as never },
    );
    const refused = await configureComponentProp(deps, caller, { id: componentId, prop_name: "repo" });
    expect(refused).toMatchObject({ options: null, stringOptions: null, context: null });
    expect(JSON.parse(refused.errors[0] ?? "")).toEqual({
      name: "OptionsResultError",
      message: "options()[1] must be a string or {label, value}, not nothing",
    });
    answer = "fail";
    const failed = await configureComponentProp(deps, caller, { id: componentId, prop_name: "repo" });
    expect(JSON.parse(failed.errors[0] ?? "")).toMatchObject({ name: "TimeoutError" });
    expect(failed.observations).toEqual([
      { k: "error", err: { name: "TimeoutError", message: "the invocation timed out after 3s" }, ts: 9 },
    ]);
  });

  it("answers 404 for a component that is not the caller's", async () => {
    const { deps, componentId } = await setUp({ props: PROPS });
    const other = await accountIn(deps, "stranger");
    await expect(
      configureComponentProp(deps, { userId: other.user.id }, { id: componentId, prop_name: "repo" }),
    ).rejects.toMatchObject({ code: "not_found" });
  });
});

describe("reloadComponentProps", () => {
  it("answers the static props of a component without additionalProps and runs no code", async () => {
    const { deps, calls, prepared, caller, componentId } = await setUp({ props: PROPS });
    const answer = await reloadComponentProps(deps, caller, { id: componentId });
    expect(answer.errors).toEqual([]);
    expect(answer.dynamicProps?.configurableProps.map((prop) => prop.name)).toEqual(["limit", "repo", "token"]);
    expect(calls).toEqual([]);
    expect(prepared).toEqual([]);
  });

  it("merges what additionalProps returned as at deploy, under an id that follows the set", async () => {
    let extra = "col_0";
    const { deps, calls, caller, componentId } = await setUp({ props: PROPS, hasAdditionalProps: true }, async () => ({
      additionalProps: [
        { name: extra, type: "string", label: "Name" },
        { name: "limit", type: "string", hidden: true },
      ],
    }));
    const first = await reloadComponentProps(deps, caller, { id: componentId, configured_props: { limit: 3 } });
    expect(calls[0]).toMatchObject({ kind: "additionalProps", event: PROPS, props: { limit: 3 } });
    expect(first.dynamicProps?.configurableProps).toEqual([
      { name: "limit", type: "integer", hidden: true },
      { name: "repo", type: "string", remoteOptions: true },
      { name: "token", type: "string", secret: true },
      { name: "col_0", type: "string", label: "Name" },
    ]);
    const same = await reloadComponentProps(deps, caller, { id: componentId, configured_props: { limit: 4 } });
    expect(same.dynamicProps?.id).toBe(first.dynamicProps?.id);
    extra = "col_1";
    const other = await reloadComponentProps(deps, caller, { id: componentId });
    expect(other.dynamicProps?.id).not.toBe(first.dynamicProps?.id);
  });

  it("answers no prop set, and the reason, when additionalProps fails or returns too many", async () => {
    let many = false;
    const { deps, caller, componentId } = await setUp({ props: PROPS, hasAdditionalProps: true }, async () =>
      many
        ? { additionalProps: Array.from({ length: 501 }, (_, i) => ({ name: `p${i}`, type: "string" })) }
        : { error: { name: "Error", message: "no sheet", ts: 1 } },
    );
    const failed = await reloadComponentProps(deps, caller, { id: componentId });
    expect(failed.dynamicProps).toBeUndefined();
    expect(JSON.parse(failed.errors[0] ?? "")).toEqual({ name: "Error", message: "no sheet" });
    many = true;
    const tooMany = await reloadComponentProps(deps, caller, { id: componentId });
    expect(tooMany.dynamicProps).toBeUndefined();
    expect(JSON.parse(tooMany.errors[0] ?? "").message).toMatch(/501 props; at most 500/);
  });
});
