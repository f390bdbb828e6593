import { afterEach, describe, expect, it, vi } from "vitest";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { jsonLogger, type Logger, silentLogger } from "#core/ports/logger";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import { type DeliveryRecord, destinationOf, type WebhookRecord } from "#core/subscription-model";
import type { DeliveryDeps } from "#core/webhook-delivery";
import { LocalDeliveryWorker } from "#local-mode/drivers/delivery-worker";
import { eventually, when } from "../../support/eventually.ts";

const FAST = { baseDelayMs: 1, maxDelayMs: 2, maxAttempts: 5, timeoutMs: 1_000, random: () => 0 };

const POLL = { timeoutMs: 5_000, intervalMs: 5 };

interface Post {
  url: string;
  deliveryId: string;
  n: number;
}

/** A sender that answers after a macrotask, records every POST and how many were in flight per URL. */
class FakeSender implements WebhookSender {
  readonly posts: Post[] = [];
  /** Most POSTs in flight at once, per URL and in all. */
  readonly peak = new Map<string, number>();
  peakAll = 0;
  /** Delivery ids to fail once (with a 503). */
  readonly failOnce = new Set<string>();
  /** While set, POSTs wait for it. */
  gate: Promise<void> | undefined;
  private readonly inFlight = new Map<string, number>();

  async post(url: string, headers: Readonly<Record<string, string>>, body: string): Promise<WebhookSendResult> {
    const deliveryId = headers["x-sluice-delivery-id"] ?? "";
    this.posts.push({ url, deliveryId, n: (JSON.parse(body) as { n: number }).n });
    const now = (this.inFlight.get(url) ?? 0) + 1;
    this.inFlight.set(url, now);
    this.peak.set(url, Math.max(this.peak.get(url) ?? 0, now));
    this.peakAll = Math.max(
      this.peakAll,
      [...this.inFlight.values()].reduce((a, b) => a + b, 0),
    );
    await new Promise((resolve) => setImmediate(resolve));
    await this.gate;
    this.inFlight.set(url, (this.inFlight.get(url) ?? 1) - 1);
    if (this.failOnce.delete(deliveryId)) return { status: 503 };
    return { status: 204 };
  }
}

const webhook = (id: string): WebhookRecord => ({
  id,
  userId: "u_1",
  workspaceId: "o_1",
  url: `http://127.0.0.1/${id}`,
  name: id,
  description: "",
  sealedSigningSecret: `sealed:${id}`,
  createdAt: 0,
  updatedAt: 0,
});

let counter = 0;
function delivery(webhookId: string): DeliveryRecord {
  counter++;
  return {
    id: `dlv_${String(counter).padStart(6, "0")}`,
    target: { kind: "webhook", webhookId },
    subscriptionIds: ["sub_1"],
    emitterId: "dc_one",
    eventId: `1-${counter}`,
    channel: "",
    payload: { n: counter },
    attempts: 0,
    nextAttemptAt: Date.now(),
    createdAt: Date.now(),
  };
}

let db: SqliteDatabase;
let worker: LocalDeliveryWorker | undefined;

afterEach(async () => {
  await worker?.stop(1_000);
  worker = undefined;
  db?.close();
});

function setUp({
  leaseMs,
  log = silentLogger,
  ...options
}: {
  batchSize?: number;
  concurrency?: number;
  inFlightPerWebhook?: number;
  internalRetryMs?: number;
  leaseMs?: number;
  log?: Logger;
} = {}) {
  db = openSqlite(":memory:");
  const queue = new SqliteDeliveryQueue(db, { leaseMs });
  const sender = new FakeSender();
  const claims = { count: 0 };
  const claimBatches = queue.claimBatches.bind(queue);
  queue.claimBatches = (...args) => {
    claims.count++;
    return claimBatches(...args);
  };
  const opened: string[] = [];
  const deps: DeliveryDeps & { log: Logger } = {
    subscriptions: { getWebhook: async (id: string) => webhook(id) } as unknown as DeliveryDeps["subscriptions"],
    // Webhook deliveries read neither.
    workflows: {} as DeliveryDeps["workflows"],
    objects: {} as DeliveryDeps["objects"],
    secrets: {
      seal: async (plaintext: string) => plaintext,
      open: async (sealed: string) => {
        opened.push(sealed);
        return `whsec_${sealed}`;
      },
    },
    deadLetters: { putDeadLetter: async () => {} } as unknown as DeliveryDeps["deadLetters"],
    clock: { nowMs: () => Date.now() },
    log,
  };
  worker = new LocalDeliveryWorker({ queue, deps, sender, settings: FAST, ...options });
  return { queue, sender, claims, opened, worker, deps };
}

const sent = (sender: FakeSender, url: string) => sender.posts.filter((p) => p.url === url).map((p) => p.deliveryId);

describe("LocalDeliveryWorker", () => {
  it("looks at the queue once for many enqueues in one turn, and sends one webhook's deliveries one at a time in order", async () => {
    const { queue, sender, claims, opened, worker } = setUp({ batchSize: 16 });
    worker.start();
    const queued = Array.from({ length: 40 }, () => delivery("wh_a"));
    for (const record of queued) void queue.enqueue([record]);
    await eventually(() => when(queue.size() === 0), "every delivery", POLL);
    expect(sent(sender, webhook("wh_a").url)).toEqual(queued.map((record) => record.id));
    expect(sender.peak.get(webhook("wh_a").url)).toBe(1);
    // start, then three batches (16 + 16 + 8) and a last look: not one claim per enqueue.
    expect(claims.count).toBeLessThanOrEqual(6);
    // The signing secret is opened once, not once per delivery.
    expect(opened).toEqual(["sealed:wh_a"]);
  });

  it("delivers to several webhooks at once, each one at a time", async () => {
    const { queue, sender } = setUp({ batchSize: 4, concurrency: 3 });
    const byWebhook = new Map(["wh_a", "wh_b", "wh_c"].map((id) => [id, [] as DeliveryRecord[]]));
    const all: DeliveryRecord[] = [];
    for (let i = 0; i < 30; i++) {
      const record = delivery(`wh_${"abc"[i % 3]}`);
      byWebhook.get(destinationOf(record))?.push(record);
      all.push(record);
    }
    await queue.enqueue(all);
    worker?.start();
    await eventually(() => when(queue.size() === 0), "every delivery", POLL);
    for (const [id, records] of byWebhook) {
      expect(sent(sender, webhook(id).url)).toEqual(records.map((record) => record.id));
      expect(sender.peak.get(webhook(id).url)).toBe(1);
    }
    expect(sender.peakAll).toBeGreaterThan(1);
  });

  it("with several in flight per webhook, starts a batch's deliveries in queue order, never more at once than asked", async () => {
    const { queue, sender, claims } = setUp({ batchSize: 16, inFlightPerWebhook: 3 });
    const queued = Array.from({ length: 40 }, () => delivery("wh_a"));
    await queue.enqueue(queued);
    worker?.start();
    await eventually(() => when(queue.size() === 0), "every delivery", POLL);
    expect(sent(sender, webhook("wh_a").url)).toEqual(queued.map((record) => record.id));
    expect(sender.peak.get(webhook("wh_a").url)).toBe(3);
    // Still one claim per batch: 16 + 16 + 8, plus the first and last looks.
    expect(claims.count).toBeLessThanOrEqual(6);
  });

  it("with several in flight, a stop releases what no lane started and keeps what was sent", async () => {
    const { queue, sender, worker: first } = setUp({ batchSize: 10, inFlightPerWebhook: 2 });
    let open: () => void = () => {};
    sender.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const queued = Array.from({ length: 10 }, () => delivery("wh_a"));
    await queue.enqueue(queued);
    first.start();
    await eventually(() => when(sender.posts.length === 2), "two deliveries in flight", POLL);
    const stopped = first.stop(5_000);
    open();
    expect(await stopped).toBe(true);
    expect(sent(sender, webhook("wh_a").url)).toEqual(queued.slice(0, 2).map((record) => record.id));
    // The eight never started are due again, unattempted, in their order.
    expect(queue.size()).toBe(8);
    const again = queue.claimBatches(Date.now(), 1, 10)[0] ?? [];
    expect(again.map((record) => [record.id, record.attempts])).toEqual(
      queued.slice(2).map((record) => [record.id, 0]),
    );
  });

  it("goes on with a batch past a failed delivery, and retries that one afterwards", async () => {
    const { queue, sender } = setUp({ batchSize: 8 });
    const queued = Array.from({ length: 5 }, () => delivery("wh_a"));
    sender.failOnce.add(queued[1]!.id);
    await queue.enqueue(queued);
    worker?.start();
    await eventually(() => when(queue.size() === 0), "every delivery", POLL);
    const order = sent(sender, webhook("wh_a").url);
    expect(order.slice(0, 5)).toEqual(queued.map((record) => record.id));
    expect(order.slice(5)).toEqual([queued[1]!.id]);
  });

  it("stops between two deliveries of a batch and leaves the rest due, unattempted, for the next start", async () => {
    const { queue, sender, worker: first, deps } = setUp({ batchSize: 10 });
    let open: () => void = () => {};
    sender.gate = new Promise((resolve) => {
      open = resolve;
    });
    const queued = Array.from({ length: 4 }, () => delivery("wh_a"));
    await queue.enqueue(queued);
    first.start();
    await eventually(() => when(sender.posts.length === 1), "the first POST", POLL);
    const stopped = first.stop(1_000);
    open();
    expect(await stopped).toBe(true);
    expect(sender.posts.map((p) => p.deliveryId)).toEqual([queued[0]!.id]);
    // The stop wrote the delivered one's grouped deletion (read past the queue, which would write it).
    expect(db.prepare("SELECT count(*) AS n FROM deliveries").get()).toEqual({ n: 3 });
    expect(queue.size()).toBe(3);
    for (const record of queued.slice(1)) expect(queue.get(record.id)?.attempts).toBe(0);
    // A new worker on the same queue delivers the rest at once, in order.
    sender.gate = undefined;
    worker = new LocalDeliveryWorker({ queue, deps, sender, settings: FAST });
    worker.start();
    await eventually(() => when(queue.size() === 0), "the rest", POLL);
    expect(sent(sender, webhook("wh_a").url)).toEqual(queued.map((record) => record.id));
  });

  it("cuts a batch short when its next attempt could outlast the claim's lease, and sends the rest in later batches", async () => {
    // The lease leaves 5 ms once the attempt time limit and the margin are taken off; each POST takes 10.
    const { queue, sender, deps, worker } = setUp({ batchSize: 10, leaseMs: FAST.timeoutMs + 1_000 + 5 });
    const queued = Array.from({ length: 4 }, () => delivery("wh_a"));
    let now = (queued.at(-1) as DeliveryRecord).nextAttemptAt;
    deps.clock.nowMs = () => now;
    const post = sender.post.bind(sender);
    sender.post = (...args) => {
      now += 10;
      return post(...args);
    };
    const release = vi.spyOn(queue, "release");
    await queue.enqueue(queued);
    worker.start();
    await eventually(() => when(queue.size() === 0), "every delivery", POLL);
    expect(sent(sender, webhook("wh_a").url)).toEqual(queued.map((record) => record.id));
    // One delivery per batch: the ones after it were released unattempted, 3 + 2 + 1 of them.
    expect(release).toHaveBeenCalledTimes(6);
    expect(sender.peak.get(webhook("wh_a").url)).toBe(1);
  });

  it("releases a delivery Sluice failed to attempt (its secret would not open) without counting it, and tries it later", async () => {
    const lines: Record<string, unknown>[] = [];
    const log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const { queue, sender, deps, worker } = setUp({ internalRetryMs: 30, log });
    const open = deps.secrets.open;
    let failures = 1;
    deps.secrets.open = async (sealed) => {
      if (failures-- > 0) throw new Error("the key is unavailable");
      return open(sealed);
    };
    const release = vi.spyOn(queue, "release");
    const reschedule = vi.spyOn(queue, "reschedule");
    const record = delivery("wh_a");
    await queue.enqueue([record]);
    worker.start();
    await eventually(() => when(queue.size() === 0), "the delivery", POLL);
    expect(sent(sender, webhook("wh_a").url)).toEqual([record.id]);
    expect(reschedule).not.toHaveBeenCalled();
    expect(release).toHaveBeenCalledTimes(1);
    expect(release.mock.calls[0]?.[1]).toBeGreaterThanOrEqual(record.nextAttemptAt + 30);
    expect(lines).toMatchObject([
      { level: "error", message: "webhook delivery could not be attempted", delivery_id: record.id },
    ]);
  });
});
