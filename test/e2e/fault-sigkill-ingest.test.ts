import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareEventIds } from "#core/event-ids";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { postUids } from "../support/uid-load.ts";
import { expectOneDeliveryIdPerEvent, UID_EMITTER, WebhookReceiver } from "../support/webhook-receiver.ts";

/** A source whose deploy() lasts until the time its `until` prop gives (ms since the epoch). */
const SLOW_DEPLOY = `export default {
  name: "Slow deploy",
  version: "0.0.1",
  props: { until: { type: "string" } },
  hooks: {
    async deploy() {
      while (Date.now() < Number(this.until)) await new Promise((resolve) => setTimeout(resolve, 100));
    },
  },
  async run() {},
};`;

/** A source whose `activate()` waits until the time its `until` prop says. */
const SLOW_ACTIVATE = `export default {
  name: "Slow activate",
  version: "0.0.1",
  props: { until: { type: "string" } },
  hooks: {
    async activate() {
      while (Date.now() < Number(this.until)) await new Promise((resolve) => setTimeout(resolve, 100));
    },
  },
  async run() {},
};`;

const ENV = {
  SLUICE_WEBHOOK_BASE_DELAY_MS: "50",
  SLUICE_WEBHOOK_MAX_DELAY_MS: "200",
  // Enough attempts that nothing becomes a dead letter while the receiver fails on purpose.
  SLUICE_WEBHOOK_MAX_ATTEMPTS: "100",
  SLUICE_WEBHOOK_TIMEOUT_MS: "2000",
};

/**
 * Issue 6's first fault test: local mode killed with SIGKILL while it ingests, restarted on the
 * same data dir. Every request answered 2xx is in the history (0 lost), and every event in the
 * history reaches the webhook, retries and re-dispatches under the same delivery id only. Then a
 * second kill while deliveries are pending (the receiver failing): they arrive after the restart.
 */
describe("SIGKILL while ingesting (issue 6)", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let box: WebhookReceiver;
  let sourceId: string;
  let endpoint: string;

  beforeAll(async () => {
    box = await WebhookReceiver.start();
    sluice = await startSluice({ env: ENV });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const created = await api("POST", "/sources", { component_code: UID_EMITTER });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    sourceId = created.json.data.id;
    endpoint = created.json.data.configured_props.http.endpoint_url;
    const hook = await api("POST", `/webhooks?url=${encodeURIComponent(box.url())}`);
    expect(hook.status, JSON.stringify(hook.json)).toBe(200);
    const subscribed = await api("POST", `/subscriptions?emitter_id=${sourceId}&listener_id=${hook.json.data.id}`);
    expect(subscribed.status, JSON.stringify(subscribed.json)).toBe(200);
  });

  afterAll(async () => {
    await sluice?.stop();
    await box?.stop();
  });

  /** Kills the server hard and starts it again on the same data dir. */
  async function killAndRestart() {
    const ended = await sluice.stop("SIGKILL");
    expect(ended.signal).toBe("SIGKILL");
    sluice = await startSluice({ dataDir: sluice.dataDir, env: ENV });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  }

  /** Every event of the source's history, oldest first. */
  async function history(): Promise<{ id: string; uid: string }[]> {
    const events: { id: string; uid: string }[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await api(
        "GET",
        `/sources/${sourceId}/event_summaries?limit=100${cursor ? `&after=${cursor}` : ""}`,
      );
      expect(page.status).toBe(200);
      for (const item of page.json.data) events.push({ id: item.id, uid: item.event.uid });
      if (page.json.data.length < 100) break;
      cursor = page.json.page_info.end_cursor;
    }
    return events.sort((a, b) => compareEventIds(a.id, b.id));
  }

  /** Waits until every uid is stored; returns the history then. */
  async function storedIncluding(uids: readonly string[]) {
    return eventually(
      async () => {
        const events = await history();
        const stored = new Set(events.map((event) => event.uid));
        return uids.every((uid) => stored.has(uid)) ? events : undefined;
      },
      "every accepted event in the history",
      { timeoutMs: 30_000, intervalMs: 200 },
    ).catch(async (error) => {
      const stored = new Set((await history()).map((event) => event.uid));
      const lost = uids.filter((uid) => !stored.has(uid));
      throw new Error(`${lost.length} of ${uids.length} accepted events lost: ${String(error)}`);
    });
  }

  /** Waits until every event of `events` reached the receiver; checks that duplicates share a delivery id. */
  async function deliveredAll(events: readonly { id: string; uid: string }[]) {
    await eventually(
      () => {
        const got = new Set(box.receipts.map((receipt) => receipt.eventId));
        return when(events.every((event) => got.has(event.id)));
      },
      "every stored event at the receiver",
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    expectOneDeliveryIdPerEvent(box.receipts);
    // What was received is what was stored.
    const stored = new Map(events.map((event) => [event.id, event.uid]));
    for (const receipt of box.receipts) {
      if (stored.has(receipt.eventId)) expect(receipt.uid).toBe(stored.get(receipt.eventId));
    }
  }

  it("loses no event answered 2xx, and delivers every stored event, when killed mid-ingest", async () => {
    const load = postUids(endpoint, 20);
    await eventually(() => when(load.accepted.length >= 300), "300 accepted requests", {
      timeoutMs: 30_000,
    });
    // Killed while the workers keep sending: requests in flight are never answered.
    await killAndRestart();
    await load.stop();
    const accepted = [...load.accepted];
    expect(accepted.length).toBeGreaterThanOrEqual(300);

    const events = await storedIncluding(accepted);
    const stored = new Set(events.map((event) => event.uid));
    expect(accepted.filter((uid) => !stored.has(uid))).toEqual([]);
    await deliveredAll(events);
  });

  it("delivers after a restart what was pending when it was killed", async () => {
    box.status = 503;
    const uids: string[] = Array.from({ length: 40 }, () => randomUUID());
    for (const uid of uids) {
      const answer = await fetch(endpoint.replace(/^http:\/\/[^/]+/, new URL(sluice.baseUrl).origin), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ uid }),
      });
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
    }
    const events = await storedIncluding(uids);
    const pending = new Set(events.filter((event) => uids.includes(event.uid)).map((event) => event.id));
    // Their deliveries are being attempted, and failing.
    await eventually(
      () => when(box.refused.some((request) => pending.has(String(request.headers["x-sluice-event-id"])))),
      "failed attempts",
    );
    expect(box.receipts.filter((receipt) => pending.has(receipt.eventId))).toEqual([]);

    await killAndRestart();
    box.status = 200;
    await deliveredAll(await history());
  });
  it("leaves no half-deployed source when killed mid-deploy, and a retry with the same Idempotency-Key deploys once", async () => {
    // deploy() waits until a time the body carries, so the retry (the same body) after the
    // restart finds it passed; the first attempt is killed long before.
    const until = Date.now() + 12_000;
    const body = { component_code: SLOW_DEPLOY, name: "slow-deploy", configured_props: { until: String(until) } };
    const key = { "Idempotency-Key": `deploy-${randomUUID()}` };
    const first = api("POST", "/sources", body, key).catch((error: unknown) => error);
    const half = await eventually(async () => {
      const listed = await api("GET", "/users/me/sources?limit=100");
      return listed.json.data.find((source: { name: string }) => source.name === "slow-deploy");
    }, "the source listed while deploy() runs");
    expect(half.deploy_state).toBe("deploying");
    const during = await api("POST", "/sources", body, key);
    expect(during.status, JSON.stringify(during.json)).toBe(409);
    expect(during.json.error).toContain("Idempotency-Key");

    await killAndRestart();
    await first;
    expect((await api("GET", `/sources/${half.id}`)).status).toBe(404);
    const named = async () =>
      (await api("GET", "/users/me/sources?limit=100")).json.data.filter((source: { name: string }) =>
        source.name.startsWith("slow-deploy"),
      );
    expect(await named()).toEqual([]);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())));
    const retried = await api("POST", "/sources", body, key);
    expect(retried.status, JSON.stringify(retried.json)).toBe(200);
    expect(retried.json.data).not.toHaveProperty("deploy_state");
    const again = await api("POST", "/sources", body, key);
    expect(again.status).toBe(200);
    expect(again.json.data.id).toBe(retried.json.data.id);
    expect((await named()).map((source: { id: string }) => source.id)).toEqual([retried.json.data.id]);
    expect((await api("DELETE", `/sources/${retried.json.data.id}`)).status).toBe(200);
  });

  it("leaves a source whole when killed mid-update: inactive with its new settings after the restart, and a PUT activates it", async () => {
    const made = await api("POST", "/sources", { component_code: SLOW_ACTIVATE, configured_props: { until: "0" } });
    expect(made.status, JSON.stringify(made.json)).toBe(200);
    const id = made.json.data.id as string;
    const until = String(Date.now() + 120_000);
    const first = api("PUT", `/sources/${id}`, { configured_props: { until } }).catch((error: unknown) => error);
    await eventually(
      async () => when((await api("GET", `/sources/${id}`)).json.data.deploy_state === "deploying"),
      "the update running activate()",
    );
    const during = await api("PUT", `/sources/${id}`, { active: false });
    expect(during.status, JSON.stringify(during.json)).toBe(409);

    await killAndRestart();
    await first;
    const stopped = await api("GET", `/sources/${id}`);
    expect(stopped.status).toBe(200);
    expect(stopped.json.data).toMatchObject({
      active: false,
      configured_props: { until },
      deploy_state: "failed",
      deploy_error: expect.stringContaining("interrupted"),
    });
    const back = await api("PUT", `/sources/${id}`, { active: true, configured_props: { until: "0" } });
    expect(back.status, JSON.stringify(back.json)).toBe(200);
    expect(back.json.data).toMatchObject({ active: true, configured_props: { until: "0" } });
    expect(back.json.data).not.toHaveProperty("deploy_state");
    expect((await api("DELETE", `/sources/${id}`)).status).toBe(200);
  });
});
