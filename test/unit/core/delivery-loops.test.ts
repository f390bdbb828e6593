import { describe, expect, it } from "vitest";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { LOOP_ERROR_NAME } from "#core/delivery-loops";
import { dispatchEvents } from "#core/dispatcher";
import { HOPS_HEADER, hopsOf, hopsOfRequest, MAX_DELIVERY_HOPS, stampHops } from "#core/hops";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { SourceRunJob } from "#core/ports/run-queue";
import type { WebhookSender } from "#core/ports/webhook-sender";
import { receiveHttpRequest } from "#core/source-endpoint";
import { runSource } from "#core/source-runs";
import { deploySource } from "#core/sources";
import type { DeliveryRecord } from "#core/subscription-model";
import { createSubscription } from "#core/subscriptions";
import { attemptDelivery } from "#core/webhook-delivery";
import { createWebhook } from "#core/webhooks";
import { dispatcherInputSchema } from "#internal/event-dispatcher";
import { runJobSchema } from "#internal/source-runner";
import { deliveryRecordSchema } from "#internal/webhook-deliverer";
import { accountIn, memoryDeps, type Script, scriptedHost } from "../../support/memory-deps.ts";

/**
 * Issue 12, item 6: hop counts through the trusted side. A request's `x-sluice-hops` goes into its
 * run, the run's events carry it, deliveries send one more, and a request over the bound is
 * refused with one `$errors` event, not one per request.
 */
const HTTP = { name: "http", type: "$.interface.http" };

async function setUp(customResponse = false, script?: Script) {
  const emitting: Script = async () => ({
    emits: [{ event: { n: 1 }, meta: {} }],
    logs: [{ ts: 1, level: "log", message: "ran" }],
    ...(customResponse ? { response: { status: 200, headers: {}, body: "ok" } } : {}),
  });
  const { host, calls } = scriptedHost({ props: [{ ...HTTP, customResponse }] }, script ?? emitting);
  const jobs: SourceRunJob[] = [];
  const deps = memoryDeps(Date.now(), {
    host,
    runs: { enqueue: async (job) => void jobs.push(job as SourceRunJob) },
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  const account = await accountIn(deps, "looper");
  const caller = { userId: account.user.id };
  const source = await deploySource(deps, caller, { component_code: "code" });
  const key =
    String((source.configured_props.http as { endpoint_url: string }).endpoint_url)
      .split("/")
      .at(-1) ?? "";
  return { deps, calls, jobs, caller, source, key };
}

function request(hops?: string | string[]): IncomingHttpRequest {
  return {
    method: "POST",
    path: "/",
    rawQuery: "",
    headers: { "content-type": "application/json", ...(hops === undefined ? {} : { [HOPS_HEADER]: hops }) },
    body: Buffer.from('{"a":1}'),
    clientIp: "127.0.0.1",
    url: "http://x/",
  };
}

/** A delivery as the dispatcher queues it, `hops` deliveries down a chain. */
function queuedDelivery(webhookId: string, hops: number): DeliveryRecord {
  return {
    id: "dlv_0001",
    target: { kind: "webhook", webhookId },
    subscriptionIds: [],
    emitterId: "dc_one",
    eventId: "1-0",
    channel: "",
    payload: {},
    attempts: 0,
    nextAttemptAt: 0,
    createdAt: 0,
    hops,
  };
}

describe("reading and stamping hop counts", () => {
  it.each([
    [undefined, 0],
    ["3", 3],
    [" 4 ", 4],
    [["2", "5"], 5],
    ["1, 7", 7],
    ["-1", 0],
    ["abc", 0],
    ["1e3", 0],
    ["9999999999", 0],
  ] as const)("reads %j as %i", (value, hops) => {
    expect(hopsOfRequest(request(value as string | string[] | undefined).headers)).toBe(hops);
    expect(hopsOfRequest({ "X-Sluice-Hops": value as string | undefined })).toBe(hops);
  });

  it("marks every event of a run, and removes a count nobody trusted set", () => {
    const events: NewEvent[] = [
      { channel: "", event: 1, emitId: "a", meta: { id: 1 } },
      { channel: "$logs", event: 2, emitId: "b", meta: { hops: 99 } },
    ];
    stampHops(events, 2);
    expect(events.map((event) => event.meta)).toEqual([{ id: 1, hops: 2 }, { hops: 2 }]);
    stampHops(events, 0);
    expect(events.map((event) => event.meta)).toEqual([{ id: 1 }, {}]);
  });
});

describe("a request's hop count", () => {
  it("goes with a queued run, and every event the run stores carries it", async () => {
    const { deps, jobs, key, source } = await setUp();
    expect((await receiveHttpRequest(deps, key, request("3"))).status).toBe(200);
    expect(jobs).toEqual([expect.objectContaining({ sourceId: source.id, hops: 3 })]);
    await runSource(deps, jobs[0] as SourceRunJob);
    const stored = (await deps.events.listEvents(source.id, { limit: 10, channel: "" })).items;
    const logs = (await deps.events.listEvents(source.id, { limit: 10, channel: "$logs" })).items;
    expect([...stored, ...logs].map((event) => event.meta.hops)).toEqual([3, 3]);
  });

  it("goes with a custom-response run the same way", async () => {
    const { deps, key, source } = await setUp(true);
    expect((await receiveHttpRequest(deps, key, request("2"))).status).toBe(200);
    await expect
      .poll(async () => (await deps.events.listEvents(source.id, { limit: 10, channel: "" })).items[0]?.meta.hops)
      .toBe(2);
  });

  it("is absent from the events of a run no delivery led to", async () => {
    const { deps, jobs, key, source } = await setUp();
    await receiveHttpRequest(deps, key, request());
    expect(jobs[0]).not.toHaveProperty("hops");
    await runSource(deps, jobs[0] as SourceRunJob);
    const [event] = (await deps.events.listEvents(source.id, { limit: 10, channel: "" })).items;
    expect(event?.meta).not.toHaveProperty("hops");
  });
});

describe("a request over the bound", () => {
  it("is refused with 508 without running the source, and the source gets one $errors event", async () => {
    const { deps, calls, jobs, key, source } = await setUp();
    const over = String(MAX_DELIVERY_HOPS + 1);
    expect((await receiveHttpRequest(deps, key, request(String(MAX_DELIVERY_HOPS)))).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const answer = await receiveHttpRequest(deps, key, request(over));
      expect(answer.status).toBe(508);
      expect(JSON.parse(String(answer.body)).error).toContain("loop detected");
    }
    expect(jobs).toHaveLength(1);
    expect(calls).toEqual([]);
    const errors = (await deps.events.listEvents(source.id, { limit: 10, channel: "$errors" })).items;
    expect(errors).toHaveLength(1);
    const error = errors[0]?.event as { error: { code: string; message: string }; original_event: { body: unknown } };
    expect(error.error.code).toBe(LOOP_ERROR_NAME);
    expect(error.error.message).toContain(`${HOPS_HEADER}: ${over}`);
    expect(error.original_event.body).toEqual({ a: 1 });
    expect(errors[0]?.meta.hops).toBe(MAX_DELIVERY_HOPS + 1);
  });

  it("is recorded again after another error became the newest", async () => {
    const { deps, key, source } = await setUp();
    const over = String(MAX_DELIVERY_HOPS + 1);
    await receiveHttpRequest(deps, key, request(over));
    // Another process (another server, another Lambda instance) sees the stored error only.
    const other = { ...deps, events: Object.create(deps.events) as typeof deps.events };
    await receiveHttpRequest(other, key, request(over));
    expect((await deps.events.listEvents(source.id, { limit: 10, channel: "$errors" })).totalCount).toBe(1);
    await deps.events.appendEvents(
      source.id,
      [{ channel: "$errors", event: { error: { code: "Error" } }, emitId: "x", meta: {} }],
      deps.clock.nowMs(),
    );
    const third = { ...deps, events: Object.create(deps.events) as typeof deps.events };
    await receiveHttpRequest(third, key, request(over));
    const codes = (await deps.events.listEvents(source.id, { limit: 10, channel: "$errors" })).items.map(
      (event) => (event.event as { error: { code: string } }).error.code,
    );
    expect(codes).toEqual([LOOP_ERROR_NAME, "Error", LOOP_ERROR_NAME]);
  });
});

describe("routing and delivering counted events", () => {
  it("sends a delivery one hop further than its event; a source listener's run keeps the count", async () => {
    const { deps, caller, source } = await setUp();
    const queued: DeliveryRecord[] = [];
    deps.deliveries = { enqueue: async (records) => void queued.push(...records) } as typeof deps.deliveries;
    const runs: SourceRunJob[] = [];
    deps.runs = { enqueue: async (job) => void runs.push(job as SourceRunJob) };
    const webhook = await createWebhook(deps, caller, { url: "http://127.0.0.1:9/hook" });
    const listener = await deploySource(deps, caller, { component_code: "listener" });
    await createSubscription(deps, caller, { emitter_id: source.id, listener_id: webhook.id });
    await createSubscription(deps, caller, { emitter_id: source.id, listener_id: listener.id });
    const event = (id: string, hops?: number): StoredEvent => ({
      sourceId: source.id,
      id,
      indexedAtMs: 1,
      channel: "",
      event: { id },
      emitId: id,
      meta: hops === undefined ? {} : { hops },
    });
    await dispatchEvents(deps, [event("1-0"), event("1-1", 2)]);
    expect(queued.map((delivery) => delivery.hops)).toEqual([1, 3]);
    expect(runs.map((job) => job.hops)).toEqual([undefined, 2]);
  });

  it("sends the count as x-sluice-hops and does not retry a 508", async () => {
    const { deps, caller } = await setUp();
    const webhook = await createWebhook(deps, caller, { url: "http://127.0.0.1:9/hook" });
    const sent: Record<string, string>[] = [];
    const sender: WebhookSender = {
      post: async (_url, headers) => {
        sent.push({ ...headers });
        return { status: 508 };
      },
    };
    const outcome = await attemptDelivery(deps, sender, queuedDelivery(webhook.id, 6), deps.clock.nowMs());
    expect(sent[0]?.[HOPS_HEADER]).toBe("6");
    expect(outcome).toEqual({ kind: "dead", attempts: 1, error: "HTTP 508 (a delivery loop: not retried)" });
    expect((await deps.deadLetters.listDeadLetters(webhook.id, { limit: 10 })).totalCount).toBe(1);
  });

  it("keeps the count in the AWS messages of a published event, a queued run and a queued delivery", () => {
    const { detail } = dispatcherInputSchema.parse({
      source: "sluice.events",
      "detail-type": "event.stored",
      detail: {
        sourceId: "dc_a",
        events: [
          { sourceId: "dc_a", id: "1-0", indexedAtMs: 1, channel: "", event: {}, emitId: "e", meta: { hops: 4 } },
        ],
      },
    });
    expect("events" in detail && hopsOf(detail.events[0] as StoredEvent)).toBe(4);
    expect(runJobSchema.parse({ sourceId: "dc_a", trigger: "http", event: {}, hops: 4 }).hops).toBe(4);
    expect(deliveryRecordSchema.parse(JSON.parse(JSON.stringify(queuedDelivery("wh_a", 4)))).hops).toBe(4);
  });
});

describe("a webhook on one of this service's own source endpoints", () => {
  it("is refused at creation with a 400 naming url; other URLs of the same host are not", async () => {
    const { deps, caller } = await setUp();
    const base = deps.runtime.publicUrl;
    const port = new URL(base).port;
    for (const url of [`${base}/http/abc`, `${base.toUpperCase()}/http/abc?x=1`, `${base}/./http/abc`]) {
      await expect(createWebhook(deps, caller, { url }), url).rejects.toMatchObject({
        issues: [{ field: "url", message: expect.stringContaining("is a source endpoint of this Sluice") }],
      });
    }
    for (const url of [`${base}/v1/hook`, `${base}/httpx/abc`, `http://127.0.0.1:${Number(port) + 1}/http/abc`]) {
      expect((await createWebhook(deps, caller, { url })).url).toBe(url);
    }
  });
});
