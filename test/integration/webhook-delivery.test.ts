/**
 * Webhook delivery end to end, below the HTTP API: events stored in a SQLite file, dispatched by
 * `dispatchEvents`, queued in the SQLite delivery queue, POSTed by the real sender from the local
 * worker to receivers on 127.0.0.1. Retry delays are tiny; every wait polls with a deadline.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteSubscriptionStore } from "#adapters/local/sqlite-subscription-store";
import type { SourceRecord, StoredEvent } from "#core/component-model";
import { listDeadLetters, replayDeadLetter } from "#core/dead-letters";
import { dispatchEvents } from "#core/dispatcher";
import { sseEnvelope } from "#core/event-views";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { silentLogger } from "#core/ports/logger";
import type { SubscriptionRecord, WebhookRecord } from "#core/subscription-model";
import type { DeliverySettings } from "#core/webhook-delivery";
import { verifyWebhookSignature } from "#core/webhook-signature";
import { LocalDeliveryWorker } from "#local-mode/drivers/delivery-worker";
import { eventually, when } from "../support/eventually.ts";
import { type ReceivedRequest, WebhookReceiver } from "../support/webhook-receiver.ts";

const ADA = { userId: "u_ada", workspaceId: "o_ada" };
const SOURCE: SourceRecord = {
  id: "dc_emitter",
  userId: ADA.userId,
  workspaceId: ADA.workspaceId,
  componentId: "sc_x",
  name: "emitter",
  nameSlug: "emitter",
  configuredProps: {},
  active: true,
  createdAt: 0,
  updatedAt: 0,
};
/** Fast retries: the whole policy fits in well under a second. */
const FAST: Partial<DeliverySettings> = { baseDelayMs: 10, maxDelayMs: 80, maxAttempts: 40, timeoutMs: 2_000 };

/** Polls until `condition` holds (the shared `eventually`, for yes-or-no probes). */
const waitFor = (what: string, condition: () => boolean | Promise<boolean>) =>
  eventually(async () => when(await condition()), what, { timeoutMs: 10_000, intervalMs: 10 });

interface World {
  dir: string;
  file: string;
  db: SqliteDatabase;
  deps: Deps;
  queue: SqliteDeliveryQueue;
  worker: LocalDeliveryWorker;
  sender: Http1WebhookSender;
  secrets: Map<string, string>;
}

let world: World;
const receivers: WebhookReceiver[] = [];

async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  receivers.push(r);
  return r;
}

function openQueue(file: string): { db: SqliteDatabase; queue: SqliteDeliveryQueue } {
  const db = openSqlite(file);
  return { db, queue: new SqliteDeliveryQueue(db, { leaseMs: 5_000 }) };
}

function startWorker(settings: Partial<DeliverySettings> = FAST): LocalDeliveryWorker {
  world.worker = new LocalDeliveryWorker({
    queue: world.queue,
    deps: world.deps,
    sender: world.sender,
    settings,
    concurrency: 4,
  });
  world.worker.start();
  return world.worker;
}

/** Reopens the SQLite file as a restarted process would, with a new queue and worker. */
async function restart(settings: Partial<DeliverySettings> = FAST): Promise<void> {
  await world.worker.stop(2_000);
  world.db.close();
  const { db, queue } = openQueue(world.file);
  world.db = db;
  world.queue = queue;
  world.deps = { ...world.deps, ...storesOn(db), deliveries: queue };
  startWorker(settings);
}

async function addWebhook(
  r: WebhookReceiver,
  emitterKey: string,
  eventName = "",
): Promise<{ webhook: WebhookRecord; subscription: SubscriptionRecord }> {
  const id = world.deps.ids.newId("webhook");
  const secret = `whsec_${randomBytes(12).toString("hex")}`;
  const webhook: WebhookRecord = {
    id,
    userId: ADA.userId,
    workspaceId: ADA.workspaceId,
    url: r.url(),
    name: id,
    description: "",
    sealedSigningSecret: await world.deps.secrets.seal(secret),
    createdAt: Date.now(),
    updatedAt: Date.now(),
  };
  await world.deps.subscriptions.createWebhook(webhook);
  world.secrets.set(id, secret);
  return { webhook, subscription: await subscribe(emitterKey, id, eventName) };
}

function subscribe(emitterKey: string, webhookId: string, eventName = ""): Promise<SubscriptionRecord> {
  return world.deps.subscriptions.putSubscription({
    id: world.deps.ids.newId("subscription"),
    userId: ADA.userId,
    workspaceId: ADA.workspaceId,
    emitterId: emitterKey.split(":")[0] ?? emitterKey,
    emitterKind: emitterKey.startsWith("dc_*") ? "sources-glob" : "source",
    emitterKey,
    listenerId: webhookId,
    listenerKind: "webhook",
    eventName,
    createdAt: Date.now(),
  });
}

async function deadLetterCount(webhookId: string): Promise<number> {
  return (await world.deps.deadLetters.listDeadLetters(webhookId, { limit: 1 })).totalCount;
}

/** The stores of one open database file. */
function storesOn(db: SqliteDatabase) {
  return {
    events: new SqliteEventStore(db),
    subscriptions: new SqliteSubscriptionStore(db),
    deadLetters: new SqliteDeadLetterStore(db),
  };
}

/** Stores events as a run would, then dispatches them with their source's owner, as the bus does. */
async function emit(...payloads: { event: unknown; channel?: string }[]): Promise<StoredEvent[]> {
  const stored = await world.deps.events.appendEvents(
    SOURCE.id,
    payloads.map((p, i) => ({
      channel: p.channel ?? "",
      event: p.event as StoredEvent["event"],
      emitId: `emit-${Date.now()}-${i}`,
      meta: { summary: `event ${i}` },
    })),
    Date.now(),
  );
  await dispatchEvents(world.deps, stored, SOURCE);
  return stored;
}

const eventIdsOf = (requests: ReceivedRequest[]) => requests.map((r) => r.headers["x-sluice-event-id"]);

beforeEach(async () => {
  const dir = await mkdtemp(join(tmpdir(), "sluice-webhooks-"));
  const file = join(dir, "sluice.db");
  const { db, queue } = openQueue(file);
  const deps = {
    ...storesOn(db),
    deliveries: queue,
    runs: {
      enqueue: async () => {
        throw new Error("no source listens in these tests");
      },
    },
    secrets: new LocalSecrets(randomBytes(32)),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log: silentLogger,
  } as Partial<Deps> as Deps;
  world = {
    dir,
    file,
    db,
    deps,
    queue,
    secrets: new Map(),
    sender: new Http1WebhookSender({ allowPrivateAddresses: true }),
    worker: undefined as unknown as LocalDeliveryWorker,
  };
  startWorker();
});

afterEach(async () => {
  await world.worker.stop(2_000);
  world.sender.close();
  for (const r of receivers.splice(0)) await r.stop();
  world.db.close();
  await rm(world.dir, { recursive: true, force: true });
});

describe("webhook delivery end to end", () => {
  it("delivers exactly what was emitted, once per webhook, in emit order, with verifiable signatures", async () => {
    const one = await receiver();
    const all = await receiver();
    const { webhook: exact, subscription: first } = await addWebhook(one, SOURCE.id);
    // A second subscription of the same webhook through the glob: still one delivery per event.
    const glob = await subscribe(`dc_*:${ADA.userId}`, exact.id);
    const { webhook: everything } = await addWebhook(all, `dc_*:${ADA.userId}`);
    const stored = await emit(
      { event: { order: 1, text: "héllo" } },
      { event: { order: 2 } },
      { event: "not routed", channel: "elsewhere" },
      { event: [3, { nested: true }] },
    );
    const routed = stored.filter((event) => event.channel === "");
    for (const [r, webhook] of [
      [one, exact],
      [all, everything],
    ] as const) {
      await waitFor("three deliveries", () => r.delivered.length >= 3);
      expect(eventIdsOf(r.requests)).toEqual(routed.map((event) => event.id));
      const secret = world.secrets.get(webhook.id) ?? "";
      r.requests.forEach((request, i) => {
        const event = routed[i] as StoredEvent;
        expect(JSON.parse(request.body)).toEqual(JSON.parse(JSON.stringify(sseEnvelope(event))));
        expect(JSON.parse(request.body).e).toEqual(event.event);
        expect(request.headers["content-type"]).toBe("application/json");
        expect(request.headers["user-agent"]).toBe("Sluice-Webhooks/1");
        expect(request.headers["x-sluice-delivery-id"]).toMatch(/^dlv_/);
        const timestamp = Number(request.headers["x-sluice-timestamp"]);
        const signature = request.headers["x-sluice-signature"] as string;
        expect(verifyWebhookSignature(secret, signature, request.body, 300, Math.floor(Date.now() / 1000))).toBe(true);
        expect(signature.startsWith(`t=${timestamp},`)).toBe(true);
        expect(verifyWebhookSignature("whsec_wrong", signature, request.body, 300, timestamp)).toBe(false);
      });
    }
    // The oldest (smallest id) of the matching subscriptions is named.
    const subscriptionHeaders = new Set(one.requests.map((r) => r.headers["x-sluice-subscription-id"]));
    expect([...subscriptionHeaders]).toEqual([[first.id, glob.id].sort()[0]]);
    await waitFor("an empty queue", () => world.queue.size() === 0);
    expect(one.requests).toHaveLength(3);
    expect(all.requests).toHaveLength(3);
  });

  it("delivers one webhook's events in emit order across separate emits, the worker busy meanwhile", async () => {
    const r = await receiver();
    await addWebhook(r, SOURCE.id);
    const stored: StoredEvent[] = [];
    // Each emit is queued while the worker may be POSTing an earlier one (it has 4 slots).
    for (let n = 0; n < 12; n++) stored.push(...(await emit({ event: { n } })));
    await waitFor("every event", () => r.delivered.length === 12);
    expect(eventIdsOf(r.requests)).toEqual(stored.map((event) => event.id));
  });

  it("delivers every event missed while the receiver was down once it is back, duplicates only under one delivery id", async () => {
    const r = await receiver();
    const { webhook } = await addWebhook(r, SOURCE.id);
    await r.stop();
    const stored = await emit({ event: { n: 1 } }, { event: { n: 2 } }, { event: { n: 3 } });
    await waitFor("failed attempts", () => hasFailedAttempts(3));
    await r.start();
    await waitFor("every missed event", () => new Set(eventIdsOf(r.delivered)).size === 3);
    expect(new Set(eventIdsOf(r.delivered))).toEqual(new Set(stored.map((e) => e.id)));
    const deliveryIdsByEvent = new Map<string, Set<string>>();
    for (const request of r.requests) {
      const eventId = request.headers["x-sluice-event-id"] as string;
      const ids = deliveryIdsByEvent.get(eventId) ?? new Set();
      ids.add(request.headers["x-sluice-delivery-id"] as string);
      deliveryIdsByEvent.set(eventId, ids);
    }
    for (const ids of deliveryIdsByEvent.values()) expect(ids.size).toBe(1);
    await waitFor("an empty queue", () => world.queue.size() === 0);
    expect(await deadLetterCount(webhook.id)).toBe(0);
  });

  it("keeps a delivery that never succeeds as a dead letter, and a replay delivers it under the same id", async () => {
    await world.worker.stop();
    startWorker({ ...FAST, maxAttempts: 3 });
    const r = await receiver();
    r.status = 500;
    const { webhook } = await addWebhook(r, SOURCE.id);
    const [event] = await emit({ event: { doomed: true } });
    const caller = { userId: ADA.userId };
    await waitFor("a dead letter", async () => (await deadLetterCount(webhook.id)) === 1);
    const page = await listDeadLetters(world.deps, caller, webhook.id, { limit: 10 });
    expect(page.data).toEqual([
      expect.objectContaining({ event_id: event?.id, attempts: 3, last_error: "HTTP 500", webhook_id: webhook.id }),
    ]);
    expect(r.requests).toHaveLength(3);
    const deliveryId = page.data[0]?.id;
    expect(new Set(r.requests.map((q) => q.headers["x-sluice-delivery-id"]))).toEqual(new Set([deliveryId]));
    await waitFor("an empty queue", () => world.queue.size() === 0);

    r.status = 200;
    await replayDeadLetter(world.deps, caller, webhook.id, deliveryId as string);
    await waitFor("the replayed delivery", () => r.delivered.length === 1);
    expect(r.delivered[0]?.headers["x-sluice-delivery-id"]).toBe(deliveryId);
    expect(JSON.parse(r.delivered[0]?.body ?? "")).toEqual(
      JSON.parse(JSON.stringify(sseEnvelope(event as StoredEvent))),
    );
    expect(await deadLetterCount(webhook.id)).toBe(0);
    await waitFor("an empty queue", () => world.queue.size() === 0);
  });

  it("loses nothing pending across a restart of the process", async () => {
    const r = await receiver();
    await addWebhook(r, SOURCE.id);
    await r.stop();
    const stored = await emit({ event: { n: 1 } }, { event: { n: 2 } });
    await waitFor("failed attempts", () => hasFailedAttempts(2));
    await restart();
    expect(world.queue.size()).toBe(2);
    await r.start();
    await waitFor("every pending event", () => new Set(eventIdsOf(r.delivered)).size === 2);
    expect(new Set(eventIdsOf(r.delivered))).toEqual(new Set(stored.map((e) => e.id)));
    await waitFor("an empty queue", () => world.queue.size() === 0);
  });
});

/** True when `count` deliveries are queued and each has failed at least once. */
function hasFailedAttempts(count: number): boolean {
  const rows = world.db.prepare("SELECT attempts FROM deliveries").all() as { attempts: number }[];
  return rows.length === count && rows.every((row) => row.attempts > 0);
}

describe("Http1WebhookSender", () => {
  it("refuses loopback, private and mapped addresses when private addresses are not allowed", async () => {
    const r = await receiver();
    const guarded = new Http1WebhookSender({ allowPrivateAddresses: false });
    try {
      for (const url of [
        r.url(),
        `http://localhost:${r.port}/hook`,
        `http://[::ffff:127.0.0.1]:${r.port}/hook`,
        `http://[::1]:${r.port}/hook`,
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[fd00::1]/",
      ]) {
        const result = await guarded.post(url, {}, "{}", 2_000);
        expect(result, url).toEqual({ error: expect.stringMatching(/^refused: /) });
      }
      expect(r.requests).toEqual([]);
    } finally {
      guarded.close();
    }
  });

  it("reports the status without following redirects, and a refused connection or a timeout as errors", async () => {
    const r = await receiver();
    r.status = 302;
    expect(await world.sender.post(r.url(), { "content-type": "application/json" }, "{}", 2_000)).toEqual({
      status: 302,
    });
    expect(r.requests).toHaveLength(1);
    await r.stop();
    const refused = await world.sender.post(r.url(), {}, "{}", 2_000);
    expect(refused).toEqual({ error: expect.stringMatching(/^ECONNREFUSED/) });

    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", () => resolve()));
    try {
      const port = (silent.address() as AddressInfo).port;
      expect(await world.sender.post(`http://127.0.0.1:${port}/`, {}, "{}", 200)).toEqual({
        error: "timeout after 200 ms",
      });
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
