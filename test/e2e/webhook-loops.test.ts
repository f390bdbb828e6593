import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOPS_HEADER, MAX_DELIVERY_HOPS } from "#core/hops";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Issue 12, item 6, as a user would run into it against `npm start`: a webhook subscribed to a
 * source and pointed at that source's own endpoint looped for ever (about 100 events/s, a growing
 * delivery backlog). Now the chain stops after MAX_DELIVERY_HOPS deliveries with one `$errors`
 * event, the refused delivery is a dead letter, and nothing stays queued.
 */
const LOOPER = `
export default {
  name: "Looper",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    // A delivery's body is the envelope of the previous event: count the chain along.
    const previous = event.body?.event?.n ?? 0;
    this.$emit({ n: previous + 1, hops: event.headers["${HOPS_HEADER}"] ?? null });
  },
};
`;

describe("delivery loops against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  async function looper() {
    const created = await api("POST", "/sources", { component_code: LOOPER });
    expect(created.status).toBe(200);
    return { id: created.json.data.id as string, endpoint: created.json.data.configured_props.http.endpoint_url };
  }

  /** The same endpoint under another name of this host, as a webhook URL that is not literally Sluice's own. */
  const viaLocalhost = (endpoint: string) => endpoint.replace("127.0.0.1", "localhost");

  async function webhookTo(url: string) {
    const created = await api("POST", `/webhooks?url=${encodeURIComponent(url)}`);
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    return created.json.data.id as string;
  }

  async function subscribe(emitter: string, listener: string) {
    expect((await api("POST", `/subscriptions?emitter_id=${emitter}&listener_id=${listener}`)).status).toBe(200);
  }

  const events = async (sourceId: string, channel: string) =>
    (await api("GET", `/sources/${sourceId}/event_summaries?expand=event&event_name=${encodeURIComponent(channel)}`))
      .json;

  /** The first page of a source's channel, once it holds something. */
  const eventuallyEvents = (sourceId: string, channel: string, what: string) =>
    eventually(async () => {
      const page = await events(sourceId, channel);
      return page.data.length > 0 ? page : undefined;
    }, what);

  const deadLetters = async (webhookId: string) => (await api("GET", `/webhooks/${webhookId}/dead_letters`)).json;

  /** Deliveries still queued, read from the data file as the server wrote it. */
  function queuedDeliveries(): number {
    const db = new Database(join(sluice.dataDir, "sluice.db"), { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT count(*) AS n FROM deliveries").get() as { n: number }).n;
    } finally {
      db.close();
    }
  }

  async function trigger(endpoint: string) {
    const answer = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
  }

  it("refuses a webhook whose URL is a source endpoint of this Sluice", async () => {
    const source = await looper();
    const refused = await api("POST", `/webhooks?url=${encodeURIComponent(source.endpoint)}`);
    expect(refused.status).toBe(400);
    expect(refused.json.details[0].field).toBe("url");
  });

  it("stops a webhook on its own source's endpoint after the bound, with one $errors event, and leaves no backlog", async () => {
    const source = await looper();
    const webhook = await webhookTo(viaLocalhost(source.endpoint));
    await subscribe(source.id, webhook);
    await trigger(source.endpoint);

    const errors = await eventuallyEvents(source.id, "$errors", "the loop's $errors event");
    expect(errors.data[0].event.error.code).toBe("LoopDetected");
    expect(errors.data[0].event.error.message).toContain(`${HOPS_HEADER}: ${MAX_DELIVERY_HOPS + 1}`);
    const dead = await eventually(async () => {
      const page = await deadLetters(webhook);
      return page.data.length > 0 ? page : undefined;
    }, "the refused delivery's dead letter");
    expect(dead.data[0].last_error).toBe("HTTP 508 (a delivery loop: not retried)");
    expect(dead.data[0].attempts).toBe(1);

    // The first request and one run per accepted delivery: n = 1 (no header) to MAX + 1.
    const emitted = (await events(source.id, "default")).data;
    expect(emitted.map((e: { event: { n: number } }) => e.event.n)).toEqual(
      Array.from({ length: MAX_DELIVERY_HOPS + 1 }, (_, i) => MAX_DELIVERY_HOPS + 1 - i),
    );
    expect(emitted.map((e: { event: { hops: string | null } }) => e.event.hops).reverse()).toEqual([
      null,
      ...Array.from({ length: MAX_DELIVERY_HOPS }, (_, i) => String(i + 1)),
    ]);
    // Nothing is left queued (the refused delivery's row goes just after its dead letter is
    // stored), and nothing more happens.
    await eventually(() => when(queuedDeliveries() === 0), "an empty delivery queue");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await events(source.id, "default")).page_info.total_count).toBe(MAX_DELIVERY_HOPS + 1);
    expect(queuedDeliveries()).toBe(0);

    // Another request makes another chain, stopped the same way, without a second error event.
    await trigger(source.endpoint);
    await eventually(async () => when((await deadLetters(webhook)).data.length === 2), "the second dead letter");
    expect((await events(source.id, "default")).page_info.total_count).toBe(2 * (MAX_DELIVERY_HOPS + 1));
    expect((await events(source.id, "$errors")).page_info.total_count).toBe(1);
    await eventually(() => when(queuedDeliveries() === 0), "an empty delivery queue");
  });

  it("stops a loop through two sources and two webhooks", async () => {
    const [a, b] = [await looper(), await looper()];
    const [toA, toB] = [await webhookTo(viaLocalhost(a.endpoint)), await webhookTo(viaLocalhost(b.endpoint))];
    await subscribe(a.id, toB);
    await subscribe(b.id, toA);
    await trigger(a.endpoint);

    // a (0 hops) -> b (1) -> a (2) -> b (3) -> a (4) -> b (5) -> a (6): refused.
    const errors = await eventuallyEvents(a.id, "$errors", "the loop's $errors event on the first source");
    expect(errors.data[0].event.error.code).toBe("LoopDetected");
    expect((await events(a.id, "default")).page_info.total_count).toBe(3);
    expect((await events(b.id, "default")).page_info.total_count).toBe(3);
    expect((await events(b.id, "$errors")).page_info.total_count).toBe(0);
    await eventually(() => when(queuedDeliveries() === 0), "an empty delivery queue");
  });
});
