import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhookSignature } from "#core/webhook-signature";
import { apiClient, inBatches } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { type ReceivedRequest, WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Issue 5's "Done when", as a user would try it against `npm start`: two webhooks on a receiver
 * at 127.0.0.1, one subscribed to a source and one to `dc_*`; the receiver goes down and comes
 * back; a webhook that never recovers ends in the dead letters and a replay delivers it, as does a
 * workflow's `$.send.http`.
 */
const EMITTER = `
export default {
  name: "Webhook emitter",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit({ n: event.body.n }, { summary: "n=" + event.body.n });
  },
};
`;

describe("subscriptions and webhook delivery against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({
      env: {
        SLUICE_WEBHOOK_MAX_ATTEMPTS: "4",
        SLUICE_WEBHOOK_BASE_DELAY_MS: "100",
        SLUICE_WEBHOOK_MAX_DELAY_MS: "400",
        SLUICE_WEBHOOK_TIMEOUT_MS: "2000",
      },
    });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  async function webhook(url: string) {
    const created = await api("POST", `/webhooks?url=${encodeURIComponent(url)}&name=e2e`);
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    return { id: created.json.data.id as string, secret: created.json.data.signing_secret as string };
  }

  async function subscribe(emitter: string, listener: string) {
    const answer = await api(
      "POST",
      `/subscriptions?emitter_id=${encodeURIComponent(emitter)}&listener_id=${listener}`,
    );
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return answer.json.data.id as string;
  }

  async function emit(endpoint: string, numbers: number[]) {
    await inBatches(numbers, 5, async (n) => {
      const answer = await fetch(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n }),
      });
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
    });
  }

  const numbersOf = (deliveries: ReceivedRequest[]) =>
    deliveries.map((d) => JSON.parse(d.body).event.n as number).sort((a, b) => a - b);

  it("delivers what was emitted to both webhooks, signed; a receiver that was down gets every missed event", async () => {
    const box = await WebhookReceiver.start();
    const [one, all] = [await webhook(box.url("/ok/one")), await webhook(box.url("/ok/all"))];
    const created = await api("POST", "/sources", { component_code: EMITTER });
    expect(created.status).toBe(200);
    const source = {
      id: created.json.data.id as string,
      endpoint: created.json.data.configured_props.http.endpoint_url as string,
    };
    const direct = await subscribe(source.id, one.id);
    const glob = await subscribe("dc_*", all.id);
    // Subscribing twice changes nothing.
    expect(await subscribe(source.id, one.id)).toBe(direct);

    await emit(source.endpoint, [1, 2, 3]);
    const toOne = () => box.requests.filter((d) => d.path === "/ok/one");
    const toAll = () => box.requests.filter((d) => d.path === "/ok/all");
    await eventually(async () => when(toOne().length >= 3 && toAll().length >= 3), "6 deliveries");
    expect(numbersOf(toOne())).toEqual([1, 2, 3]);
    expect(numbersOf(toAll())).toEqual([1, 2, 3]);
    const now = Math.floor(Date.now() / 1000);
    for (const [delivery, secret, subscription] of [
      ...toOne().map((d) => [d, one.secret, direct] as const),
      ...toAll().map((d) => [d, all.secret, glob] as const),
    ]) {
      const signature = String(delivery.headers["x-sluice-signature"]);
      expect(verifyWebhookSignature(secret, signature, delivery.body, 300, now)).toBe(true);
      // And as a receiver using a Standard Webhooks library would.
      const headers = delivery.headers as Record<string, string>;
      expect(new Webhook(secret).verify(delivery.body, headers)).toEqual(JSON.parse(delivery.body));
      expect(headers["webhook-id"]).toBe(headers["x-sluice-delivery-id"]);
      expect(() =>
        new Webhook(secret === one.secret ? all.secret : one.secret).verify(delivery.body, headers),
      ).toThrow();
      expect(
        verifyWebhookSignature(secret === one.secret ? all.secret : one.secret, signature, delivery.body, 300, now),
      ).toBe(false);
      expect(delivery.headers["x-sluice-subscription-id"]).toBe(subscription);
      expect(delivery.headers["x-sluice-event-id"]).toBe(JSON.parse(delivery.body).id);
      expect(delivery.headers["x-sluice-delivery-id"]).toMatch(/^dlv_/);
      expect(JSON.parse(delivery.body).metadata.emitter_id).toBe(source.id);
    }

    // The receiver goes down; events keep being emitted; it comes back on the same port.
    const port = box.port;
    await box.stop();
    await emit(source.endpoint, [4, 5, 6]);
    await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?limit=10`);
      return when(page.json.page_info.total_count >= 6);
    }, "events 4 to 6 stored");
    const back = await WebhookReceiver.start(port);
    try {
      await eventually(
        async () => {
          const one = back.requests.filter((d) => d.path === "/ok/one");
          const all = back.requests.filter((d) => d.path === "/ok/all");
          return when(new Set(numbersOf(one)).size >= 3 && new Set(numbersOf(all)).size >= 3);
        },
        "the missed deliveries",
        { timeoutMs: 20_000 },
      );
      for (const path of ["/ok/one", "/ok/all"]) {
        const deliveries = back.requests.filter((d) => d.path === path);
        expect([...new Set(numbersOf(deliveries))]).toEqual([4, 5, 6]);
        // Any duplicate is a retry of the same delivery: same delivery id for the same event.
        const idsByEvent = new Map<string, Set<string>>();
        for (const d of deliveries) {
          const ids = idsByEvent.get(String(d.headers["x-sluice-event-id"])) ?? new Set();
          ids.add(String(d.headers["x-sluice-delivery-id"]));
          idsByEvent.set(String(d.headers["x-sluice-event-id"]), ids);
        }
        expect([...idsByEvent.values()].every((ids) => ids.size === 1)).toBe(true);
      }
    } finally {
      await back.stop();
    }
  });

  it("delivers a source's events to a subscribed source, whose run gets the emitted event", async () => {
    const listenerCode = `
export default {
  name: "Listener",
  version: "0.0.1",
  props: {},
  async run(event) {
    this.$emit({ got: event }, { summary: "relayed" });
  },
};
`;
    const emitter = await api("POST", "/sources", { component_code: EMITTER });
    const listener = await api("POST", "/sources", { component_code: listenerCode });
    expect(listener.status, JSON.stringify(listener.json)).toBe(200);
    await subscribe(emitter.json.data.id, listener.json.data.id);
    await emit(emitter.json.data.configured_props.http.endpoint_url, [7, 8]);
    const relayed = await eventually(async () => {
      const page = await api("GET", `/sources/${listener.json.data.id}/event_summaries`);
      return page.json.data.length >= 2 ? page.json.data : undefined;
    }, "two relayed events");
    expect(relayed.map((e: { event: { got: { n: number } } }) => e.event.got.n).sort()).toEqual([7, 8]);
  });

  it("keeps a webhook that never recovers as a dead letter, and a replay delivers it", async () => {
    const box = await WebhookReceiver.start();
    box.status = 500;
    try {
      const hook = await webhook(box.url("/broken"));
      const created = await api("POST", "/sources", { component_code: EMITTER });
      await subscribe(created.json.data.id, hook.id);
      await emit(created.json.data.configured_props.http.endpoint_url, [42]);
      const dead = await eventually(
        async () => {
          const page = await api("GET", `/webhooks/${hook.id}/dead_letters`);
          expect(page.status).toBe(200);
          return page.json.data.length > 0 ? page.json.data[0] : undefined;
        },
        "a dead letter",
        { timeoutMs: 20_000 },
      );
      expect(dead).toMatchObject({ webhook_id: hook.id, attempts: 4, last_error: "HTTP 500" });
      expect(box.requests).toHaveLength(4);
      expect(new Set(box.requests.map((d) => d.headers["x-sluice-delivery-id"]))).toEqual(new Set([dead.id]));

      // The receiver is fixed; the replay delivers the same delivery (same id, same body).
      box.status = 204;
      const replay = await api("POST", `/webhooks/${hook.id}/dead_letters/${dead.id}/replay`);
      expect(replay.status, JSON.stringify(replay.json)).toBe(200);
      await eventually(async () => when(box.requests.length >= 5), "the replayed delivery");
      const replayed = box.requests[4]!;
      expect(replayed.headers["x-sluice-delivery-id"]).toBe(dead.id);
      expect(JSON.parse(replayed.body).event).toEqual({ n: 42 });
      expect((await api("GET", `/webhooks/${hook.id}/dead_letters`)).json.data).toEqual([]);
      expect((await api("POST", `/webhooks/${hook.id}/dead_letters/${dead.id}/replay`)).status).toBe(404);
    } finally {
      await box.stop();
    }
  });

  it("keeps a workflow's $.send.http that never succeeds as a dead letter, listed without its credentials; a replay sends it whole", async () => {
    const box = await WebhookReceiver.start();
    box.status = 500;
    try {
      const url = box.url("/sends?api_key=k-123&page=2");
      const send = `$.send.http({ method: "post", url: ${JSON.stringify(url)},
        headers: { "x-api-token": "tok-9", "x-kind": "order" }, params: { token: "p-7", q: "a" },
        auth: { username: "ann", password: "s3cret" }, data: { id: steps.trigger.event.body.id } });`;
      const created = await api("POST", "/workflows", {
        settings: { name: "failing send", auto_deploy: true },
        steps: [{ namespace: "send", component_code: `export default { async run({ steps, $ }) { ${send} } }` }],
        triggers: [{ type: "http" }],
      });
      expect(created.status, JSON.stringify(created.json)).toBe(200);
      const flow = { id: created.json.data.id as string, url: created.json.data.triggers[0].endpoint_url as string };
      const posted = await fetch(flow.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id: "D1" }),
      });
      expect(posted.status).toBe(200);
      await posted.arrayBuffer();
      const dead = await eventually(
        async () => {
          const page = await api("GET", `/workflows/${flow.id}/dead_letters`);
          expect(page.status, JSON.stringify(page.json)).toBe(200);
          return page.json.data[0];
        },
        "the send's dead letter",
        { timeoutMs: 20_000 },
      );
      expect(box.requests).toHaveLength(4);
      expect(dead).toEqual({
        id: expect.stringMatching(/^dlv_/),
        workflow_id: flow.id,
        run_id: expect.stringMatching(/^run_/),
        type: "http",
        request: {
          method: "POST",
          url: box.url("/sends?api_key=%5Bredacted%5D&page=2"),
          headers: { "x-api-token": "[redacted]", "x-kind": "order" },
          params: { token: "[redacted]", q: "a" },
          auth: { username: "ann", password: "[redacted]" },
          data: { id: "D1" },
        },
        s3: null,
        attempts: 4,
        last_error: "HTTP 500",
        created_at: expect.any(Number),
        failed_at: expect.any(Number),
      });
      const runs = await api("GET", `/workflows/${flow.id}/runs`);
      expect(runs.json.data.map((run: { id: string }) => run.id)).toEqual([dead.run_id]);

      // Fixed: the replay sends the request as the run made it, credentials included.
      box.status = 204;
      const replay = await api("POST", `/workflows/${flow.id}/dead_letters/${dead.id}/replay`);
      expect(replay.status, JSON.stringify(replay.json)).toBe(200);
      expect(replay.json.data).toEqual({ id: dead.id, workflow_id: flow.id, replayed: true });
      await eventually(async () => when(box.requests.length >= 5), "the replayed send");
      const sent = box.requests[4]!;
      const query = new URL(sent.path, "http://x").searchParams;
      expect([query.get("api_key"), query.get("page"), query.get("token"), query.get("q")]).toEqual([
        "k-123",
        "2",
        "p-7",
        "a",
      ]);
      expect(sent.headers["x-api-token"]).toBe("tok-9");
      expect(sent.headers.authorization).toBe(`Basic ${Buffer.from("ann:s3cret").toString("base64")}`);
      expect(JSON.parse(sent.body)).toEqual({ id: "D1" });
      expect((await api("GET", `/workflows/${flow.id}/dead_letters`)).json.data).toEqual([]);
      expect((await api("POST", `/workflows/${flow.id}/dead_letters/${dead.id}/replay`)).status).toBe(404);
      const all = await api("POST", `/workflows/${flow.id}/dead_letters/replay`);
      expect(all.json.data).toEqual({ workflow_id: flow.id, replayed: 0, remaining: 0 });
    } finally {
      await box.stop();
    }
  });
});
