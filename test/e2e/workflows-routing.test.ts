import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, deployHttpSource } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { type ReceivedRequest, UID_EMITTER, WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Routing into and out of workflows against `npm start` (design step 8): sources' events start
 * workflow runs through source triggers, a workflow's `$.send.emit` events and `$errors` reach
 * webhooks, workflows and sources through subscriptions. Real sandbox, real SQLite stores, a
 * receiver on 127.0.0.1.
 */

/** A code step that emits what started the run, tagged with `tag`. */
const forward = (tag: string) => `export default defineComponent({
  async run({ steps, $ }) {
    $.send.emit({ raw_event: { via: ${JSON.stringify(tag)}, got: steps.trigger.event } });
  },
});`;

/** A code step that throws, naming the uid of the HTTP request that started the run. */
const FAILING_STEP = `export default defineComponent({
  async run({ steps }) {
    throw new Error("boom " + steps.trigger.event.body.uid);
  },
});`;

/** A source that emits what a subscription delivers to it. */
const RELAY_SOURCE = `export default {
  name: "Relay",
  version: "0.0.1",
  props: {},
  async run(event) {
    this.$emit({ relayed: event }, { summary: "relayed" });
  },
};`;

/** After a count was reached: long enough for a duplicate to arrive if routing made one. */
const SETTLE_MS = 500;
const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

type Api = ReturnType<typeof apiClient>;

describe("routing into and out of workflows against local mode", () => {
  let sluice: SluiceProcess;
  let api: Api;
  let box: WebhookReceiver;
  let workspaceId: string;

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
    box = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await sluice?.stop();
    await box?.stop();
  });

  const ok = (answer: { status: number; json: unknown }) => {
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return (answer.json as { data: any }).data;
  };
  const createWorkflow = async (body: Record<string, unknown>) =>
    ok(await api("POST", "/workflows", { settings: { name: "routing", auto_deploy: true }, ...body }));
  /** A webhook on the receiver at `/<path>`. */
  const webhook = async (path: string): Promise<string> =>
    ok(await api("POST", `/webhooks?url=${encodeURIComponent(box.url(`/${path}`))}&name=${path}`)).id;
  const subscribe = async (emitter: string, listener: string, eventName?: string) =>
    ok(
      await api(
        "POST",
        `/subscriptions?emitter_id=${encodeURIComponent(emitter)}&listener_id=${listener}` +
          (eventName === undefined ? "" : `&event_name=${encodeURIComponent(eventName)}`),
      ),
    );
  const post = async (url: string, body: unknown) => {
    const answer = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(answer.status, await answer.text()).toBe(200);
  };
  /** The 2xx deliveries to `/<path>`. */
  const at = (path: string) => box.delivered.filter((request) => request.path === `/${path}`);
  const bodies = (requests: ReceivedRequest[]) => requests.map((request) => JSON.parse(request.body));
  /** Waits for `count` deliveries at `/<path>`, then for any extra one, and answers them. */
  const deliveredAt = async (path: string, count: number) => {
    await eventually(() => when(at(path).length >= count), `${count} deliveries at /${path}`);
    await settle();
    const requests = at(path);
    expect(requests, `deliveries at /${path}`).toHaveLength(count);
    // Each event once: one delivery per event id, one event id per delivery.
    const eventIds = requests.map((request) => String(request.headers["x-sluice-event-id"]));
    const deliveryIds = requests.map((request) => String(request.headers["x-sluice-delivery-id"]));
    expect(new Set(eventIds).size).toBe(count);
    expect(new Set(deliveryIds).size).toBe(count);
    return bodies(requests);
  };
  const runsOf = async (workflowId: string) => ok(await api("GET", `/workflows/${workflowId}/runs`));
  const uidsOf = (events: any[], pick: (event: any) => string) => events.map(pick).sort();

  it("runs a workflow on each event of its source trigger; its emits reach a webhook with event.raw_event", async () => {
    const source = await deployHttpSource(api, UID_EMITTER);
    const flow = await createWorkflow({
      steps: [{ namespace: "forward", component_code: forward("A") }],
      triggers: [{ type: "source", props: { source_id: source.id } }],
    });
    await subscribe(flow.id, await webhook("emits"));

    for (const uid of ["a1", "a2", "a3"]) await post(source.endpoint, { uid });

    const delivered = await deliveredAt("emits", 3);
    expect(uidsOf(delivered, (body) => body.event.raw_event.got.uid)).toEqual(["a1", "a2", "a3"]);
    for (const body of delivered) {
      expect(body.event).toEqual({ raw_event: { via: "A", got: { uid: expect.any(String) } } });
      expect(body.metadata).toMatchObject({ emitter_id: flow.id, name: "" });
    }
    const runs = await eventually(async () => {
      const found = await runsOf(flow.id);
      return when(found.length === 3 && found.every((run: { status: string }) => run.status === "success"))
        ? found
        : undefined;
    }, "three recorded runs");
    for (const run of runs) {
      expect(run.trigger).toEqual({ type: "event", id: source.id });
      expect(run.id).toMatch(/^run_/);
    }
    const listed = ok(await api("GET", `/workflows/${flow.id}/event_summaries`));
    expect(listed.map((event: any) => event.event.raw_event.got.uid).sort()).toEqual(["a1", "a2", "a3"]);
  });

  it("deploys the source of a component trigger, shown as the workflow's, whose events start runs", async () => {
    const flow = await createWorkflow({
      steps: [{ namespace: "forward", component_code: forward("deployed") }],
      triggers: [{ type: "source", props: { component_code: UID_EMITTER } }],
    });
    const [trigger] = flow.triggers;
    expect(trigger).toMatchObject({ id: expect.stringMatching(/^dc_/), owner_id: flow.id });
    await subscribe(flow.id, await webhook("deployed"));

    await post(trigger.configured_props.http.endpoint_url, { uid: "d1" });

    const [body] = await deliveredAt("deployed", 1);
    expect(body.event.raw_event).toEqual({ via: "deployed", got: { uid: "d1" } });
  });

  it("routes a workflow's emits to another workflow and to a source, and theirs onwards", async () => {
    const first = await createWorkflow({
      steps: [{ namespace: "forward", component_code: forward("first") }],
      triggers: [{ type: "http" }],
    });
    const second = await createWorkflow({ steps: [{ namespace: "forward", component_code: forward("second") }] });
    const relay = ok(await api("POST", "/sources", { component_code: RELAY_SOURCE }));
    await subscribe(first.id, second.id);
    await subscribe(first.id, relay.id);
    await subscribe(second.id, await webhook("second"));
    await subscribe(relay.id, await webhook("relay"));

    for (const uid of ["c1", "c2"]) await post(first.triggers[0].endpoint_url, { uid });

    // The listener gets the stored event: a workflow's emit is `{raw_event}`.
    const fromSecond = await deliveredAt("second", 2);
    expect(uidsOf(fromSecond, (body) => body.event.raw_event.got.raw_event.got.body.uid)).toEqual(["c1", "c2"]);
    for (const body of fromSecond) {
      expect(body.event.raw_event).toMatchObject({ via: "second", got: { raw_event: { via: "first" } } });
      expect(body.metadata.emitter_id).toBe(second.id);
    }
    const fromRelay = await deliveredAt("relay", 2);
    expect(uidsOf(fromRelay, (body) => body.event.relayed.raw_event.got.body.uid)).toEqual(["c1", "c2"]);
    const secondRuns = await runsOf(second.id);
    expect(secondRuns.map((run: { trigger: unknown }) => run.trigger)).toEqual([
      { type: "event", id: first.id },
      { type: "event", id: first.id },
    ]);
  });

  it("sends each failed run's $errors event to subscribers of the workflow, p_*, the workspace and auto subscriptions, duplicates included", async () => {
    const paths = ["errors-exact", "errors-glob", "errors-workspace", "errors-auto"] as const;
    const [exact, glob, workspace, auto] = await Promise.all(paths.map((path) => webhook(path)));
    ok(await api("POST", `/auto_subscriptions?event_name=$errors&listener_id=${auto}`));
    const failing = await createWorkflow({
      steps: [{ namespace: "fail", component_code: FAILING_STEP }],
      triggers: [{ type: "http" }],
    });
    await subscribe(failing.id, exact as string, "$errors");
    await subscribe("p_*", glob as string, "$errors");
    await subscribe(workspaceId, workspace as string, "$errors");

    // The same request twice: two failed runs, two error events.
    for (let i = 0; i < 2; i++) await post(failing.triggers[0].endpoint_url, { uid: "e1" });

    const received = await Promise.all(paths.map((path) => deliveredAt(path, 2)));
    const runs = await runsOf(failing.id);
    expect(runs.map((run: { status: string }) => run.status)).toEqual(["error", "error"]);
    const stored = ok(await api("GET", `/workflows/${failing.id}/$errors/event_summaries?expand=event`));
    expect(stored).toHaveLength(2);
    for (const [index, bodies] of received.entries()) {
      expect(bodies.map((body) => body.id).sort(), paths[index]).toEqual(
        stored.map((e: { id: string }) => e.id).sort(),
      );
      for (const body of bodies) {
        expect(body.metadata).toMatchObject({ emitter_id: failing.id, name: "$errors" });
        expect(body.event).toEqual({
          original_event: expect.objectContaining({ method: "POST", body: { uid: "e1" } }),
          original_context: expect.objectContaining({
            id: expect.stringMatching(/^run_/),
            ts: expect.any(String),
            workflow_id: failing.id,
            deployment_id: failing.deployment_id,
            source_type: "HTTP",
            verified: false,
            owner_id: expect.stringMatching(/^u_/),
            platform_version: expect.any(String),
          }),
          error: {
            code: "Error",
            cellId: failing.steps[0].id,
            ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
            message: "boom e1",
            stack: expect.stringContaining("boom e1"),
          },
        });
      }
    }
    // One event per run: each error names its own run.
    const runIds = received[0]?.map((body) => body.event.original_context.id).sort();
    expect(runIds).toEqual(runs.map((run: { id: string }) => run.id).sort());
  });

  it("never runs a workflow on its own $errors", async () => {
    const failing = await createWorkflow({
      steps: [{ namespace: "fail", component_code: FAILING_STEP }],
      triggers: [{ type: "http" }],
    });
    await subscribe(failing.id, failing.id, "$errors");
    await subscribe(failing.id, await webhook("own-errors"), "$errors");

    await post(failing.triggers[0].endpoint_url, { uid: "self" });

    await deliveredAt("own-errors", 1);
    expect(await runsOf(failing.id)).toHaveLength(1);
  });
});
