import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import { DomainError } from "#core/errors";
import type { IncomingHttpRequest } from "#core/http-run-event";
import { MAX_HTTP_INTERFACE_BODY_BYTES } from "#core/http-run-event";
import type { SourceRunJob } from "#core/ports/run-queue";
import { timerTargetId } from "#core/ports/timers";
import { receiveHttpRequest } from "#core/source-endpoint";
import { runSource } from "#core/source-runs";
import { deleteSource, deploySource, updateSource } from "#core/sources";
import { accountIn, memoryDeps, type Script, scriptedHost } from "../../support/memory-deps.ts";

/**
 * The use cases of sources against a scripted host: what the component "does" is the `script`
 * function's result, so the trusted side (hooks in order, props, HTTP answers, state merging) is
 * tested on its own. The real sandbox runs in test/compat and test/e2e.
 */
async function setUp(description: Partial<ComponentDescription>, script: Script = async () => ({})) {
  const { host, calls } = scriptedHost(description, script);
  const jobs: SourceRunJob[] = [];
  const timers: string[] = [];
  const deps = memoryDeps(Date.now(), {
    host,
    runs: { enqueue: async (job) => void jobs.push(job as SourceRunJob) },
    timers: {
      schedule: async (target) => void timers.push(`schedule ${timerTargetId(target)}`),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
    registry: { readCode: async () => undefined, readTemplate: async () => undefined },
    fetcher: { fetchCode: async () => "" },
  });
  const account = await accountIn(deps, "lifecycle");
  return { deps, calls, jobs, timers, caller: { userId: account.user.id } };
}

const HTTP_PROP = { name: "http", type: "$.interface.http" };

function request(method = "POST", body = "{}"): IncomingHttpRequest {
  return {
    method,
    path: "/",
    rawQuery: "",
    headers: { "content-type": "application/json" },
    body: Buffer.from(body),
    clientIp: "127.0.0.1",
    url: "http://x/",
  };
}

const keyOf = (source: { configured_props: Record<string, unknown> }) =>
  String((source.configured_props.http as { endpoint_url: string }).endpoint_url)
    .split("/")
    .at(-1) as string;

describe("source lifecycle", () => {
  it("runs deploy then activate, deactivate then activate on update, deactivate on delete", async () => {
    const { deps, calls, timers, caller } = await setUp({
      hooks: ["deploy", "activate", "deactivate"],
      props: [{ name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } }],
    });
    const source = await deploySource(deps, caller, { component_code: "code" });
    await updateSource(deps, caller, source.id, { configured_props: { timer: { intervalSeconds: 120 } } });
    await updateSource(deps, caller, source.id, { active: false });
    await updateSource(deps, caller, source.id, { active: false });
    await deleteSource(deps, caller, source.id);
    expect(calls.map((call) => call.kind)).toEqual(["deploy", "activate", "deactivate", "activate", "deactivate"]);
    expect(timers).toEqual([
      `schedule ${source.id}`,
      `cancel ${source.id}`,
      `schedule ${source.id}`,
      `cancel ${source.id}`,
      `cancel ${source.id}`,
    ]);
  });

  it("refuses component_entry without component_files, on create and on update", async () => {
    const { deps, caller } = await setUp({ props: [] });
    await expect(deploySource(deps, caller, { component_entry: "a.mjs" })).rejects.toThrow(
      "component_entry: is given without component_files",
    );
    const source = await deploySource(deps, caller, { component_files: { "a.mjs": "code" } });
    await expect(updateSource(deps, caller, source.id, { component_entry: "a.mjs" })).rejects.toThrow(
      "component_entry: is given without component_files",
    );
  });

  it("leaves nothing behind when the deploy hook throws", async () => {
    const { deps, caller } = await setUp({ hooks: ["deploy"] }, async () => ({
      error: { name: "Error", message: "no webhook for you", ts: 1 },
    }));
    await expect(deploySource(deps, caller, { component_code: "code" })).rejects.toMatchObject({
      code: "validation",
      message: expect.stringContaining("the deploy hook failed: no webhook for you"),
    });
    expect((await deps.sources.listSourcesOfUser(caller.userId, { limit: 10 })).totalCount).toBe(0);
  });

  it("runs additionalProps with the static props and validates the final prop set", async () => {
    const { deps, calls, caller } = await setUp(
      { hasAdditionalProps: true, props: [{ name: "kind", type: "string" }] },
      async (invocation) =>
        invocation.kind === "additionalProps" ? { additionalProps: [{ name: "count", type: "integer", min: 1 }] } : {},
    );
    await expect(
      deploySource(deps, caller, { component_code: "code", configured_props: { kind: "a", count: 0 } }),
    ).rejects.toMatchObject({ issues: [{ field: "configured_props.count" }] });
    expect(calls.at(-1)?.props).toEqual({ kind: "a" });
    const source = await deploySource(deps, caller, {
      component_code: "code",
      configured_props: { kind: "a", count: 2 },
    });
    expect(source.configured_props).toEqual({ kind: "a", count: 2 });
    expect((await deps.sources.getSource(source.id))?.propDefinitions?.map((p) => p.name)).toEqual(["kind", "count"]);
  });

  it("asks additionalProps without applying what it did: a refused deploy leaves no logs or state behind", async () => {
    const { deps, calls, caller } = await setUp(
      { hasAdditionalProps: true, props: [{ name: "kind", type: "string" }] },
      async (invocation) =>
        invocation.kind === "additionalProps"
          ? {
              additionalProps: [{ name: "count", type: "integer", min: 1 }],
              logs: [{ ts: 1, level: "log", message: "asked for my props" }],
              dbWrites: { asked: true },
            }
          : {},
    );
    await expect(
      deploySource(deps, caller, { component_code: "code", configured_props: { kind: "a", count: 0 } }),
    ).rejects.toMatchObject({ issues: [{ field: "configured_props.count" }] });
    const probedId = calls.at(-1)?.sourceId as string;
    expect(probedId).toMatch(/^dc_/);
    expect((await deps.events.listEvents(probedId, { channel: "$logs", limit: 10 })).items).toEqual([]);
    expect((await deps.sources.getSourceState(probedId)).db).toEqual({});
  });
});

describe("the HTTP interface", () => {
  it("answers 404, CORS, 413 and the inactive answer without running anything", async () => {
    const { deps, calls, caller } = await setUp({ props: [HTTP_PROP] });
    const source = await deploySource(deps, caller, { component_code: "code" });
    expect((await receiveHttpRequest(deps, "nope", request())).status).toBe(404);
    const preflight = await receiveHttpRequest(deps, keyOf(source), request("OPTIONS"));
    expect(preflight.headers["access-control-allow-origin"]).toBe("*");
    const big = "x".repeat(MAX_HTTP_INTERFACE_BODY_BYTES + 1);
    expect((await receiveHttpRequest(deps, keyOf(source), request("POST", big))).status).toBe(413);
    await updateSource(deps, caller, source.id, { active: false });
    const inactive = await receiveHttpRequest(deps, keyOf(source), request());
    expect(inactive.headers["x-sluice-source-inactive"]).toBe("1");
    expect(calls).toEqual([]);
  });

  it("answers 200 at once and queues the run when there is no custom response", async () => {
    const { deps, jobs, calls, caller } = await setUp({ props: [HTTP_PROP] });
    const source = await deploySource(deps, caller, { component_code: "code" });
    const answer = await receiveHttpRequest(deps, keyOf(source), request("POST", '{"a":1}'));
    expect(answer.status).toBe(200);
    expect(calls).toEqual([]);
    expect(jobs).toEqual([
      { sourceId: source.id, trigger: "http", event: expect.objectContaining({ body: { a: 1 } }) },
    ]);
  });

  it.each([
    ["respond", 201, { response: { status: 201, headers: {}, body: "ok" } }],
    ["a throw before responding", 400, { error: { name: "Error", message: "boom", ts: 1 } }],
    ["a timeout", 504, { error: { name: "TimeoutError", message: "too slow", ts: 1 } }],
    ["an end without respond", 400, {}],
  ] as const)("answers a custom-response run's %s with %i", async (_what, status, outcome) => {
    const { deps, caller } = await setUp({ props: [{ ...HTTP_PROP, customResponse: true }] }, async () => outcome);
    const source = await deploySource(deps, caller, { component_code: "code" });
    expect((await receiveHttpRequest(deps, keyOf(source), request())).status).toBe(status);
  });

  it("answers a run that responded early only once the run has ended and its emits are stored", async () => {
    let finish!: () => void;
    const { deps, caller } = await setUp(
      { props: [{ ...HTTP_PROP, customResponse: true }] },
      (_invocation, handlers) => {
        handlers?.onRespond?.({ status: 202, headers: {}, body: "early" });
        return new Promise((resolve) => {
          finish = () =>
            resolve({
              response: { status: 202, headers: {}, body: "early" },
              emits: [{ event: { late: true }, meta: {} }],
            });
        });
      },
    );
    const source = await deploySource(deps, caller, { component_code: "code" });
    let answered = false;
    const answer = receiveHttpRequest(deps, keyOf(source), request()).finally(() => (answered = true));
    await expect.poll(() => finish !== undefined).toBe(true);
    // A turn of the event loop: an answer sent at `respond` would have arrived by now.
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    finish();
    expect(await answer).toMatchObject({ status: 202, body: "early" });
    expect((await deps.events.listEvents(source.id, { limit: 10 })).items.map((e) => e.event)).toEqual([
      { late: true },
    ]);
  });

  it("answers 503, not the run's 2xx, when the run's emits cannot be stored", async () => {
    const response = { status: 200, headers: {}, body: "stored?" };
    const { deps, caller } = await setUp({ props: [{ ...HTTP_PROP, customResponse: true }] }, async (_, handlers) => {
      // As the local host does, the moment the component calls respond.
      handlers?.onRespond?.(response);
      return { response, emits: [{ event: { n: 1 }, meta: {} }] };
    });
    const source = await deploySource(deps, caller, { component_code: "code" });
    deps.events.appendEvents = async () => {
      throw new DomainError("unavailable", "the server's disk is full: the request was not stored; try again later");
    };
    await expect(receiveHttpRequest(deps, keyOf(source), request())).rejects.toMatchObject({ code: "unavailable" });
  });
});

describe("applying a run", () => {
  it("merges the db writes of overlapping runs of one source, losing no key", async () => {
    const releases: (() => void)[] = [];
    const { deps, caller } = await setUp({ props: [HTTP_PROP] }, (invocation) => {
      const key = String((invocation.event as { body: { key: string } }).body.key);
      return new Promise((resolve) => releases.push(() => resolve({ dbWrites: { [key]: true } })));
    });
    const source = await deploySource(deps, caller, { component_code: "code" });
    const job = (key: string): SourceRunJob => ({ sourceId: source.id, trigger: "http", event: { body: { key } } });
    // Both runs read the same state before either writes; the second write must merge, not overwrite.
    const runs = [runSource(deps, job("a")), runSource(deps, job("b"))];
    await expect.poll(() => releases.length, { timeout: 2_000 }).toBe(2);
    for (const release of releases) release();
    await Promise.all(runs);
    const state = await deps.sources.getSourceState(source.id);
    expect(state.db).toEqual({ a: true, b: true });
    expect(state.version).toBe(2);
  });

  it("refuses an emit without an id under a dedupe strategy, saying so on $logs", async () => {
    const { deps, caller } = await setUp({ props: [HTTP_PROP], dedupe: "unique" }, async () => ({
      emits: [
        { event: { n: 1 }, meta: { id: "1" } },
        { event: { n: 2 }, meta: {} },
        { event: { n: 3 }, meta: { id: "1" } },
      ],
    }));
    const source = await deploySource(deps, caller, { component_code: "code" });
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    const emitted = await deps.events.listEvents(source.id, { limit: 10 });
    expect(emitted.items.map((e) => e.event)).toEqual([{ n: 1 }]);
    const logs = await deps.events.listEvents(source.id, { limit: 10, channel: "$logs" });
    expect(logs.items.map((e) => (e.event as { message: string }).message)).toEqual([
      expect.stringContaining("without an id"),
    ]);
  });
});

describe("a source's name", () => {
  it("defaults to the slug of the component's name, not its key", async () => {
    const { deps, caller } = await setUp({ key: "acme-new-orders", name: "Acme: New Orders (Instant)" });
    const source = await deploySource(deps, caller, { component_code: "code" });
    expect(source.name).toBe("acme-new-orders-instant");
    expect(source.name_slug).toBe("acme-new-orders-instant");
  });
});

describe("updating a source's code keeps its configuration", () => {
  const PROPS = [
    HTTP_PROP,
    { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } },
    { name: "limit", type: "integer" },
    { name: "greeting", type: "string", optional: true, default: "hi" },
    { name: "label", type: "string", optional: true },
    { name: "token", type: "string", secret: true },
    { name: "dropped", type: "string", optional: true },
  ];

  async function deployed() {
    let props = PROPS;
    const setup = await setUp({});
    // The scripted host describes whatever code it is given with the props of the moment.
    setup.deps.host = { ...setup.deps.host, describe: async () => ({ ...(await describeWith(props)) }) };
    const describeWith = async (defs: typeof PROPS) => ({
      type: "source" as const,
      hooks: [],
      methods: [],
      hasRun: true,
      hasAdditionalProps: false,
      props: defs,
      name: "Kept",
      version: "1",
    });
    const source = await deploySource(setup.deps, setup.caller, {
      component_code: "v1",
      configured_props: {
        timer: { intervalSeconds: 120 },
        limit: 5,
        label: "mine",
        token: "s3cret",
        dropped: "bye",
      },
    });
    const sealedBefore = (await setup.deps.sources.getSource(source.id))?.configuredProps.token;
    return { ...setup, source, sealedBefore, setProps: (defs: typeof PROPS) => (props = defs) };
  }

  it("keeps every prop the new code still declares, secrets sealed as they were, when the body has no configured_props", async () => {
    const { deps, caller, source, sealedBefore, calls, setProps } = await deployed();
    setProps(PROPS.filter((prop) => prop.name !== "dropped"));
    const updated = await updateSource(deps, caller, source.id, { component_code: "v2" });
    expect(updated.configured_props).toEqual({
      http: source.configured_props.http,
      timer: { cron: null, interval_seconds: 120 },
      limit: 5,
      greeting: "hi",
      label: "mine",
    });
    const stored = await deps.sources.getSource(source.id);
    expect(stored?.configuredProps.token).toEqual(sealedBefore);
    expect(stored?.configuredProps).not.toHaveProperty("dropped");
    expect(stored?.timer).toEqual({ intervalSeconds: 120 });
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(calls.at(-1)?.props).toMatchObject({ limit: 5, token: "s3cret", label: "mine" });
  });

  it("merges configured_props given over the kept ones; null clears one back to its default", async () => {
    const { deps, caller, source, sealedBefore, calls } = await deployed();
    const updated = await updateSource(deps, caller, source.id, {
      component_code: "v2",
      configured_props: { limit: 7, label: null },
    });
    expect(updated.configured_props).toMatchObject({ limit: 7, greeting: "hi", dropped: "bye" });
    expect(updated.configured_props).not.toHaveProperty("label");
    expect((await deps.sources.getSource(source.id))?.configuredProps.token).toEqual(sealedBefore);
    const rotated = await updateSource(deps, caller, source.id, { configured_props: { token: "n3w" } });
    expect(rotated.configured_props).toMatchObject({ limit: 7, dropped: "bye" });
    expect((await deps.sources.getSource(source.id))?.configuredProps.token).not.toEqual(sealedBefore);
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(calls.at(-1)?.props).toMatchObject({ limit: 7, token: "n3w" });
  });

  it("follows the new code's default where the value was the old code's default", async () => {
    const { deps, caller, source, setProps } = await deployed();
    setProps(PROPS.map((prop) => (prop.name === "greeting" ? { ...prop, default: "hello" } : prop)));
    const updated = await updateSource(deps, caller, source.id, { component_code: "v2" });
    expect(updated.configured_props.greeting).toBe("hello");
  });

  it("names a kept value the new code refuses, and a secret that stopped being secret is not carried", async () => {
    const { deps, caller, source, setProps } = await deployed();
    const before = await deps.sources.getSource(source.id);
    setProps(PROPS.map((prop) => (prop.name === "label" ? { name: "label", type: "integer", optional: true } : prop)));
    await expect(updateSource(deps, caller, source.id, { component_code: "v2" })).rejects.toMatchObject({
      issues: [{ field: "configured_props.label", message: "must be an integer" }],
    });
    setProps(PROPS.map((prop) => (prop.name === "token" ? { name: "token", type: "string" } : prop)));
    await expect(updateSource(deps, caller, source.id, { component_code: "v3" })).rejects.toMatchObject({
      issues: [{ field: "configured_props.token", message: "is required" }],
    });
    // The failed updates stored nothing.
    expect(await deps.sources.getSource(source.id)).toEqual(before);
  });

  it("carries no value to a prop that became an alert, which takes none", async () => {
    const { deps, caller, source, setProps } = await deployed();
    const alert = { name: "label", type: "alert", alertType: "info", content: "Read me" };
    setProps(PROPS.map((prop) => (prop.name === "label" ? alert : prop)));
    const updated = await updateSource(deps, caller, source.id, { component_code: "v2" });
    expect(updated.configured_props).not.toHaveProperty("label");
    expect((await deps.sources.getSource(source.id))?.configuredProps).not.toHaveProperty("label");
  });
});
