import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import type { DeliveryRecord } from "#core/subscription-model";

const NOW = Date.UTC(2026, 10, 20, 12);
const LEASE = 1_000;

function queue(db = openSqlite(":memory:")) {
  return new SqliteDeliveryQueue(db, { leaseMs: LEASE });
}

let counter = 0;
function delivery(webhookId: string, overrides: Partial<DeliveryRecord> = {}): DeliveryRecord {
  counter++;
  return {
    id: `dlv_${String(counter).padStart(6, "0")}`,
    target: { kind: "webhook", webhookId },
    subscriptionIds: ["sub_1"],
    emitterId: "dc_one",
    eventId: `${NOW}-${counter}`,
    channel: "",
    payload: { n: counter, nested: { text: "é" } },
    attempts: 0,
    nextAttemptAt: NOW,
    createdAt: NOW,
    ...overrides,
  };
}

const ids = (records: DeliveryRecord[]) => records.map((record) => record.id);

describe("SqliteDeliveryQueue", () => {
  it("hands back what was queued, field for field", async () => {
    const q = queue();
    const first = delivery("wh_a");
    await q.enqueue([first]);
    expect(q.size()).toBe(1);
    expect(q.claimDue(NOW, 10)).toEqual([first]);
  });

  it("reads a row queued by a version before workflows (a top-level webhookId) as a webhook delivery", async () => {
    const db = openSqlite(":memory:");
    const { target: _target, ...rest } = delivery("wh_old");
    const legacy = { ...rest, webhookId: "wh_old" };
    db.prepare(
      "INSERT INTO deliveries (id, webhook_id, next_attempt_at, claimed_until, attempts, record) VALUES (?, ?, ?, NULL, 0, ?)",
    ).run(legacy.id, "wh_old", NOW, JSON.stringify(legacy));
    const [claimed] = queue(db).claimDue(NOW, 10);
    expect(claimed).toEqual({ ...rest, target: { kind: "webhook", webhookId: "wh_old" } });
  });

  it("orders a workflow's sends by its p_, apart from its webhooks: one in flight per destination", async () => {
    const q = queue();
    const send = (n: number) =>
      delivery("unused", { target: { kind: "s3", workflowId: "p_flow", bucket: "b", key: `k${n}`, body: n } });
    const sends = [send(1), send(2)];
    const hook = delivery("wh_a");
    await q.enqueue([...sends, hook]);
    expect(ids(q.claimDue(NOW, 10)).sort()).toEqual([sends[0]?.id, hook.id].sort());
    expect(q.claimDue(NOW, 10)).toEqual([]);
    q.complete(sends[0]?.id ?? "");
    expect(q.claimDue(NOW, 10)).toEqual([sends[1]]);
  });

  it("gives each webhook one delivery at a time, in the order queued", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    const b1 = delivery("wh_b");
    const a2 = delivery("wh_a");
    const a3 = delivery("wh_a");
    await q.enqueue([a1, b1, a2]);
    await q.enqueue([a3]);
    expect(ids(q.claimDue(NOW, 10))).toEqual([a1.id, b1.id]);
    // Nothing more of wh_a while a1 is claimed.
    expect(q.claimDue(NOW, 10)).toEqual([]);
    expect(q.complete(a1.id)).toBe(true);
    expect(ids(q.claimDue(NOW, 10))).toEqual([a2.id]);
    q.complete(a2.id);
    expect(ids(q.claimDue(NOW, 10))).toEqual([a3.id]);
    q.complete(a3.id);
    q.complete(b1.id);
    expect(q.size()).toBe(0);
    expect(q.complete(a3.id)).toBe(false);
  });

  it("lets a webhook's later deliveries go ahead of one waiting for its retry, then retries that one first", async () => {
    const q = queue();
    const [a1, a2, a3] = [delivery("wh_a"), delivery("wh_a"), delivery("wh_a")];
    await q.enqueue([a1, a2, a3]);
    expect(ids(q.claimDue(NOW, 10))).toEqual([a1.id]);
    expect(q.reschedule(a1.id, NOW + 500, 1, "HTTP 503")).toBe(true);
    expect(ids(q.claimDue(NOW + 1, 10))).toEqual([a2.id]);
    q.complete(a2.id);
    // a1 is due again: it is older than a3, so it goes first.
    const [retried] = q.claimDue(NOW + 500, 10);
    expect(retried).toEqual({ ...a1, attempts: 1, nextAttemptAt: NOW + 500, lastError: "HTTP 503" });
    q.complete(a1.id);
    expect(ids(q.claimDue(NOW + 500, 10))).toEqual([a3.id]);
  });

  it("holds back deliveries not yet due and serves the longest-waiting webhooks first, up to the limit", async () => {
    const q = queue();
    const later = delivery("wh_a", { nextAttemptAt: NOW + 100 });
    const c = delivery("wh_c", { nextAttemptAt: NOW - 5 });
    const b = delivery("wh_b", { nextAttemptAt: NOW - 10 });
    const d = delivery("wh_d", { nextAttemptAt: NOW - 1 });
    await q.enqueue([later, c, b, d]);
    expect(ids(q.claimDue(NOW, 2))).toEqual([b.id, c.id]);
    expect(ids(q.claimDue(NOW, 0))).toEqual([]);
    expect(ids(q.claimDue(NOW, 5))).toEqual([d.id]);
    expect(ids(q.claimDue(NOW + 100, 5))).toEqual([later.id]);
  });

  it("makes a claimed delivery due again when its lease runs out (a crash during the attempt)", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    await q.enqueue([a1]);
    expect(ids(q.claimDue(NOW, 10))).toEqual([a1.id]);
    expect(q.claimDue(NOW + LEASE - 1, 10)).toEqual([]);
    expect(q.claimDue(NOW + LEASE, 10)).toEqual([a1]);
  });

  it("releases without counting an attempt, and releases every claim at a worker's start", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    const b1 = delivery("wh_b");
    await q.enqueue([a1, b1]);
    q.claimDue(NOW, 10);
    expect(q.release(a1.id, NOW + 50)).toBe(true);
    expect(q.claimDue(NOW + 49, 10)).toEqual([]);
    expect(q.claimDue(NOW + 50, 10)).toEqual([{ ...a1, nextAttemptAt: NOW + 50 }]);
    expect(q.releaseAllClaims()).toBe(2);
    // The longest-waiting first: b1 was due at NOW, a1 at NOW + 50.
    expect(ids(q.claimDue(NOW + 50, 10))).toEqual([b1.id, a1.id]);
  });

  it("keeps one delivery for an id queued twice (a replay racing another)", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    await q.enqueue([a1]);
    await q.enqueue([{ ...a1, attempts: 5 }]);
    expect(q.size()).toBe(1);
    expect(q.get(a1.id)?.attempts).toBe(0);
  });

  it("tells when it next has something to do", async () => {
    const q = queue();
    expect(q.nextWakeAt(NOW)).toBeUndefined();
    const a1 = delivery("wh_a", { nextAttemptAt: NOW + 300 });
    await q.enqueue([a1]);
    expect(q.nextWakeAt(NOW)).toBe(NOW + 300);
    q.claimDue(NOW + 300, 1);
    expect(q.nextWakeAt(NOW + 300)).toBe(NOW + 300 + LEASE);
    q.reschedule(a1.id, NOW + 900, 1, "HTTP 500");
    expect(q.nextWakeAt(NOW + 300)).toBe(NOW + 900);
  });

  it("calls its listeners after each enqueue commits, until they unsubscribe", async () => {
    const q = queue();
    const sizes: number[] = [];
    const stop = q.onEnqueue(() => sizes.push(q.size()));
    await q.enqueue([delivery("wh_a"), delivery("wh_a")]);
    await q.enqueue([]);
    stop();
    await q.enqueue([delivery("wh_a")]);
    expect(sizes).toEqual([2]);
  });

  it("claims a webhook's next due deliveries as one batch, in queue order, and nothing more of it until the batch ends", async () => {
    const q = queue();
    const a = [delivery("wh_a"), delivery("wh_a"), delivery("wh_a"), delivery("wh_a")];
    const b1 = delivery("wh_b");
    await q.enqueue([a[0]!, a[1]!, b1, a[2]!, a[3]!]);
    const batches = q.claimBatches(NOW, 10, 3);
    expect(batches.map(ids)).toEqual([[a[0]!.id, a[1]!.id, a[2]!.id], [b1.id]]);
    expect(batches[0]![0]).toEqual(a[0]);
    q.complete(a[0]!.id);
    q.complete(a[1]!.id);
    // a[2] is still claimed: wh_a stays busy, so a[3] waits.
    expect(q.claimBatches(NOW, 10, 3)).toEqual([]);
    q.complete(a[2]!.id);
    expect(q.claimBatches(NOW, 10, 3).map(ids)).toEqual([[a[3]!.id]]);
  });

  it("serves the longest-waiting delivery first across webhooks, so a webhook's backlog does not starve a later one", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    const b1 = delivery("wh_b");
    const a2 = delivery("wh_a");
    const c1 = delivery("wh_c");
    await q.enqueue([a1, b1, a2, c1]);
    expect(ids(q.claimDue(NOW, 1))).toEqual([a1.id]);
    q.complete(a1.id);
    // a2 was queued after b1: b1 goes first, then a2, then c1.
    expect(ids(q.claimDue(NOW, 1))).toEqual([b1.id]);
    expect(ids(q.claimDue(NOW, 1))).toEqual([a2.id]);
    expect(ids(q.claimDue(NOW, 1))).toEqual([c1.id]);
    // Every webhook is busy now; it still says something is due only once a claim ends.
    expect(q.nextWakeAt(NOW)).toBe(NOW + LEASE);
  });

  it("reads past a long tail of retries that are not due, and hands a due retry out in queue order", async () => {
    const q = queue();
    const failing = Array.from({ length: 300 }, () => delivery("wh_a"));
    await q.enqueue(failing);
    for (const [i, record] of failing.entries()) {
      expect(ids(q.claimDue(NOW, 1))).toEqual([record.id]);
      q.reschedule(record.id, NOW + 1_000 + i, 1, "HTTP 503");
    }
    const fresh = [delivery("wh_a"), delivery("wh_a")];
    await q.enqueue(fresh);
    expect(q.claimBatches(NOW, 1, 5).map(ids)).toEqual([fresh.map((record) => record.id)]);
    for (const record of fresh) q.complete(record.id);
    expect(q.nextWakeAt(NOW)).toBe(NOW + 1_000);
    const later = delivery("wh_a");
    await q.enqueue([later]);
    // The first two retries are due: older than `later`, they come first, in queue order.
    expect(q.claimBatches(NOW + 1_001, 1, 3).map(ids)).toEqual([[failing[0]!.id, failing[1]!.id, later.id]]);
  });

  it("forgets a webhook whose queue emptied, and serves it again when deliveries come", async () => {
    const q = queue();
    const a1 = delivery("wh_a");
    await q.enqueue([a1]);
    q.claimDue(NOW, 1);
    q.complete(a1.id);
    expect(q.claimDue(NOW, 1)).toEqual([]);
    expect(q.nextWakeAt(NOW)).toBeUndefined();
    const a2 = delivery("wh_a", { nextAttemptAt: NOW + 5 });
    await q.enqueue([a2]);
    expect(q.nextWakeAt(NOW)).toBe(NOW + 5);
    expect(ids(q.claimDue(NOW + 5, 1))).toEqual([a2.id]);
  });

  describe("on a file", () => {
    let dir: string | undefined;
    afterEach(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
      dir = undefined;
    });

    it("keeps queued and rescheduled deliveries across a close and reopen; a claim does not outlive its process", async () => {
      dir = await mkdtemp(join(tmpdir(), "sluice-deliveries-"));
      const file = join(dir, "sluice.db");
      const db = openSqlite(file);
      const before = new SqliteDeliveryQueue(db, { leaseMs: 60_000 });
      const [a1, a2, b1] = [delivery("wh_a"), delivery("wh_a"), delivery("wh_b")];
      await before.enqueue([a1, a2, b1]);
      before.claimDue(NOW, 10);
      before.reschedule(a1.id, NOW + 10, 1, "ECONNREFUSED");
      // b1 stays claimed: the process "dies" during its attempt.
      db.close();

      const after = new SqliteDeliveryQueue(openSqlite(file), { leaseMs: 60_000 });
      expect(after.size()).toBe(3);
      // Claims are not written: b1 is due at once, without waiting for a lease.
      expect(after.releaseAllClaims()).toBe(0);
      const claimed = after.claimDue(NOW + 10, 10);
      expect(claimed).toEqual([b1, { ...a1, attempts: 1, nextAttemptAt: NOW + 10, lastError: "ECONNREFUSED" }]);
      after.complete(a1.id);
      expect(ids(after.claimDue(NOW + 10, 10))).toEqual([a2.id]);
    });

    it("deletes completed deliveries together with its next write or read; a crash before that makes them again", async () => {
      dir = await mkdtemp(join(tmpdir(), "sluice-deliveries-"));
      const file = join(dir, "sluice.db");
      const db = openSqlite(file);
      const rows = () => (db.prepare("SELECT count(*) AS n FROM deliveries").get() as { n: number }).n;
      const q = new SqliteDeliveryQueue(db, { leaseMs: 60_000 });
      const [a1, a2, a3] = [delivery("wh_a"), delivery("wh_a"), delivery("wh_a")];
      await q.enqueue([a1, a2, a3]);
      expect(ids(q.claimBatches(NOW, 1, 10)[0] ?? [])).toEqual([a1.id, a2.id, a3.id]);
      for (const record of [a1, a2, a3]) expect(q.complete(record.id)).toBe(true);
      // Not one write per delivery: the three rows go with the next transaction.
      expect(rows()).toBe(3);
      // ...which is the next enqueue's; a delivery queued again after it was made is queued again.
      await q.enqueue([a1]);
      expect(rows()).toBe(1);
      expect(q.claimDue(NOW, 10)).toEqual([a1]);
      q.complete(a1.id);
      // The next look at the queue writes it, and hands out nothing completed.
      expect(q.claimDue(NOW, 10)).toEqual([]);
      expect(rows()).toBe(0);

      const b1 = delivery("wh_b");
      await q.enqueue([b1]);
      q.claimDue(NOW, 10);
      q.complete(b1.id);
      // The process dies before the queue is looked at again: b1 is made again, under its id.
      db.close();
      const after = new SqliteDeliveryQueue(openSqlite(file), { leaseMs: 60_000 });
      expect(after.claimDue(NOW, 10)).toEqual([b1]);
      after.complete(b1.id);
      after.flush();
      expect(after.size()).toBe(0);
    });

    it("respects a lease an older version wrote in the file until it ends or the worker releases it", async () => {
      dir = await mkdtemp(join(tmpdir(), "sluice-deliveries-"));
      const file = join(dir, "sluice.db");
      const db = openSqlite(file);
      const [a1, a2, b1] = [delivery("wh_a"), delivery("wh_a"), delivery("wh_b")];
      await new SqliteDeliveryQueue(db).enqueue([a1, a2, b1]);
      db.prepare("UPDATE deliveries SET claimed_until = ? WHERE id = ?").run(NOW + 500, a1.id);
      db.close();

      const reopened = () => new SqliteDeliveryQueue(openSqlite(file), { leaseMs: 60_000 });
      const waiting = reopened();
      expect(ids(waiting.claimDue(NOW, 10))).toEqual([b1.id]);
      expect(waiting.nextWakeAt(NOW)).toBe(NOW + 500);
      expect(ids(waiting.claimDue(NOW + 500, 10))).toEqual([a1.id]);

      const released = reopened();
      expect(released.releaseAllClaims()).toBe(1);
      expect(ids(released.claimDue(NOW, 10))).toEqual([a1.id, b1.id]);
    });
  });
});
