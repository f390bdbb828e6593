import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareEventIds } from "#core/event-ids";
import { apiClient, inBatches } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { expectOneDeliveryIdPerEvent, UID_EMITTER, WebhookReceiver } from "../support/webhook-receiver.ts";

/** How long the receiver stays down once the events emitted meanwhile are stored. */
const DOWN_MS = 2_000;

/**
 * Issue 6's second fault test: a webhook receiver that is down for a few seconds while events are
 * emitted, then back on the same port. Every delivery arrives; a delivery that arrives twice does so
 * under the same delivery id; deliveries that succeed the first time keep the emit order
 * (docs/webhooks.md, "Order").
 */
describe("a webhook receiver down for a while (issue 6)", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice({
      env: {
        SLUICE_WEBHOOK_BASE_DELAY_MS: "100",
        SLUICE_WEBHOOK_MAX_DELAY_MS: "500",
        // Retries cover the downtime many times over: nothing becomes a dead letter.
        SLUICE_WEBHOOK_MAX_ATTEMPTS: "60",
        SLUICE_WEBHOOK_TIMEOUT_MS: "2000",
        // The strict order is the one-at-a-time setting's promise; with several in flight, requests
        // sent together may be answered in any order (docs/webhooks.md, "Order").
        SLUICE_WEBHOOK_IN_FLIGHT: "1",
      },
    });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });

  afterAll(async () => {
    await sluice?.stop();
  });

  it("delivers every event once it is back, duplicates only under the same delivery id, first-time successes in order", async () => {
    const box = await WebhookReceiver.start();
    const created = await api("POST", "/sources", { component_code: UID_EMITTER });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const sourceId: string = created.json.data.id;
    const endpoint: string = created.json.data.configured_props.http.endpoint_url;
    const hook = await api("POST", `/webhooks?url=${encodeURIComponent(box.url())}`);
    expect(hook.status, JSON.stringify(hook.json)).toBe(200);
    const subscribed = await api("POST", `/subscriptions?emitter_id=${sourceId}&listener_id=${hook.json.data.id}`);
    expect(subscribed.status, JSON.stringify(subscribed.json)).toBe(200);

    const emit = (uids: readonly string[]) =>
      inBatches(uids, 5, async (uid) => {
        const answer = await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ uid }),
        });
        expect(answer.status).toBe(200);
        await answer.arrayBuffer();
      });
    const uids = (): string[] => Array.from({ length: 35 }, () => randomUUID());
    const [before, during, after] = [uids(), uids(), uids()];
    const receivedUids = () => new Set(box.receipts.map((receipt) => receipt.uid));

    // Up: the first events arrive.
    await emit(before);
    await eventually(() => when(before.every((uid) => receivedUids().has(uid))), "the first events");

    // Down: events are emitted and stored, and their deliveries fail (connection refused).
    await box.stop();
    const downSince = performance.now();
    await emit(during);
    await eventually(async () => {
      const page = await api("GET", `/sources/${sourceId}/event_summaries?limit=1`);
      return when(page.json.page_info.total_count >= before.length + during.length);
    }, "the events emitted while the receiver is down, stored");
    // The receiver stays down a few seconds in all (the fault being tested, not a wait for an effect).
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, DOWN_MS - (performance.now() - downSince))));
    expect(box.receipts.filter((receipt) => during.includes(receipt.uid))).toEqual([]);

    // Back on the same port: everything missed arrives, and what is emitted now too.
    await box.start();
    try {
      await emit(after);
      const all = [...before, ...during, ...after];
      await eventually(() => when(all.every((uid) => receivedUids().has(uid))), "every delivery", {
        timeoutMs: 30_000,
      });
      expect(receivedUids().size).toBe(all.length);

      // A delivery id names one event, and each event came under one delivery id.
      expectOneDeliveryIdPerEvent(box.receipts);
      expect(new Set(box.receipts.map((receipt) => receipt.deliveryId)).size).toBe(all.length);

      // Emitted while the receiver was up, they succeeded the first time: in emit (event id) order.
      for (const group of [before, after]) {
        const receipts = box.receipts;
        const firstArrivals = receipts.filter(
          (receipt, index) => group.includes(receipt.uid) && receipts.findIndex((r) => r.uid === receipt.uid) === index,
        );
        const eventIds = firstArrivals.map((receipt) => receipt.eventId);
        expect(eventIds).toEqual([...eventIds].sort(compareEventIds));
      }
    } finally {
      await box.stop();
    }
  });
});
