import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { dataOf, openRawStream } from "../support/sse-client.ts";
import { UID_EMITTER, WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Issue 12: an emitted `__proto__` key is data, kept on every path an event takes (stored, listed
 * in event summaries, streamed, delivered to a webhook), never silently dropped. JSON.parse makes
 * `__proto__` an own key, so it can arrive in any request body; an assignment `out[key] = value`
 * turns it into the copy's prototype instead, and the key is gone.
 */
const BODY = '{"uid":"proto","__proto__":{"polluted":true},"nested":{"__proto__":[1,2],"keep":1}}';

/** The own `__proto__` value of `value`, or a marker when it has none (not the prototype). */
const ownProto = (value: unknown) =>
  Object.getOwnPropertyDescriptor(value as object, "__proto__")?.value ?? "<no own __proto__>";

function expectKept(event: unknown, where: string) {
  expect([where, ownProto(event)]).toEqual([where, { polluted: true }]);
  const nested = (event as { nested: unknown }).nested;
  expect([where, ownProto(nested), (nested as { keep: number }).keep]).toEqual([where, [1, 2], 1]);
  // It stayed data: no object got it as its prototype.
  expect([where, Object.getPrototypeOf(event)]).toEqual([where, Object.prototype]);
}

describe("an emitted __proto__ key against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    [sluice, receiver] = await Promise.all([startSluice(), WebhookReceiver.start()]);
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await Promise.all([sluice?.stop(), receiver?.stop()]);
  });

  it("is kept in the stored event, event summaries, the live stream and the webhook payload", async () => {
    const source = (await api("POST", "/sources", { component_code: UID_EMITTER })).json.data;
    const webhook = (await api("POST", `/webhooks?url=${encodeURIComponent(receiver.url("/proto"))}`)).json.data;
    expect((await api("POST", `/subscriptions?emitter_id=${source.id}&listener_id=${webhook.id}`)).status).toBe(200);
    const root = sluice.baseUrl.replace(/\/v1$/, "");
    const stream = await openRawStream(`${root}/sources/${source.id}/sse`, {
      authorization: `Bearer ${sluice.apiKeyFromFile()}`,
    });
    try {
      const answer = await fetch(source.configured_props.http.endpoint_url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: BODY,
      });
      expect(answer.status).toBe(200);

      await eventually(() => when(stream.messages.length > 0 && receiver.requests.length > 0), "stream and webhook");
      const [streamed] = dataOf(stream.messages);
      expectKept(streamed.event, "stream event");
      expectKept(streamed.e, "stream e");
      const delivered = JSON.parse(receiver.requests[0]?.body ?? "null");
      expectKept(delivered.event, "webhook event");
      expectKept(delivered.e, "webhook e");

      for (const query of ["", "?expand=event"]) {
        const listed = await api("GET", `/sources/${source.id}/event_summaries${query}`);
        expect(listed.status).toBe(200);
        expectKept(listed.json.data[0].event, `event_summaries${query}`);
      }
    } finally {
      stream.close();
    }
  });
});
