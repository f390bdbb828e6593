import { describe, expect, it } from "vitest";
import { dispatcherInputSchema } from "#internal/event-dispatcher";
import { runJobSchema } from "#internal/source-runner";
import { deliveryRecordSchema } from "#internal/webhook-deliverer";

/**
 * The AWS functions read events from JSON other functions wrote (a queued run, an EventBridge
 * entry, a queued delivery). JSON.parse makes `__proto__` an own key; the schemas that check
 * these messages must hand it on as data, not drop it (zod's `z.json()` copies objects by
 * assignment, which turns the key into the copy's prototype).
 */
const EVENT = '{"uid":"p","__proto__":{"polluted":true},"nested":{"__proto__":[1]}}';
const ownProto = (value: unknown) => Object.getOwnPropertyDescriptor(value as object, "__proto__")?.value;

describe("a __proto__ key in what AWS functions read", () => {
  it("stays in a queued run's event (source runner)", () => {
    const job = runJobSchema.parse(JSON.parse(`{"sourceId":"dc_a","trigger":"http","event":${EVENT}}`));
    expect(ownProto(job.event)).toEqual({ polluted: true });
    expect(ownProto((job.event as { nested: unknown }).nested)).toEqual([1]);
  });

  it("stays in a published event (dispatcher)", () => {
    const entry = JSON.parse(`{
      "source": "sluice.events", "detail-type": "event.stored",
      "detail": {"sourceId": "dc_a", "events": [{"sourceId": "dc_a", "id": "1-0", "indexedAtMs": 1,
        "channel": "", "event": ${EVENT}, "emitId": "e", "meta": {}}]}}`);
    const { detail } = dispatcherInputSchema.parse(entry);
    expect("events" in detail && ownProto(detail.events[0]?.event)).toEqual({ polluted: true });
  });

  it("stays in a queued delivery's payload (deliverer)", () => {
    const delivery = deliveryRecordSchema.parse(
      JSON.parse(`{"id":"dlv_a","webhookId":"wh_a","subscriptionIds":[],"emitterId":"dc_a","eventId":"1-0",
        "channel":"","payload":{"event":${EVENT},"e":${EVENT}},"attempts":0,"nextAttemptAt":0,"createdAt":0}`),
    );
    const payload = delivery.payload as { event: unknown; e: unknown };
    expect([ownProto(payload.event), ownProto(payload.e)]).toEqual([{ polluted: true }, { polluted: true }]);
  });
});
