import type { DeliveryRecord } from "#core/subscription-model";
import type { DeliveryQueue } from "#ports/delivery-queue";
import type { SqliteDatabase } from "./sqlite-database.ts";

export interface SqliteDeliveryQueueOptions {
  /**
   * How long a claim holds a delivery. A claim not completed or rescheduled by then (the process
   * died during the attempt) makes the delivery due again. Keep it above the attempt timeout.
   * @default 60000
   */
  leaseMs?: number;
}

interface DeliveryRow {
  seq: number;
  id: string;
  webhook_id: string;
  next_attempt_at: number;
  attempts: number;
  record: string;
}

const toDelivery = (row: DeliveryRow): DeliveryRecord => ({
  ...(JSON.parse(row.record) as DeliveryRecord),
  attempts: row.attempts,
  nextAttemptAt: row.next_attempt_at,
});

function prepare(db: SqliteDatabase) {
  return {
    insert: db.prepare<object>(
      `INSERT OR IGNORE INTO deliveries (id, webhook_id, next_attempt_at, claimed_until, attempts, record)
       VALUES (@id, @webhookId, @nextAttemptAt, NULL, @attempts, @record)`,
    ),
    due: db.prepare<object, DeliveryRow>(
      `WITH busy AS (SELECT DISTINCT webhook_id FROM deliveries WHERE claimed_until > @now),
            heads AS (
              SELECT min(seq) AS seq FROM deliveries
              WHERE next_attempt_at <= @now
                AND (claimed_until IS NULL OR claimed_until <= @now)
                AND webhook_id NOT IN busy
              GROUP BY webhook_id
            )
       SELECT d.seq, d.id, d.webhook_id, d.next_attempt_at, d.attempts, d.record
       FROM deliveries d JOIN heads h ON d.seq = h.seq
       ORDER BY d.next_attempt_at, d.seq
       LIMIT @limit`,
    ),
    claim: db.prepare<object>("UPDATE deliveries SET claimed_until = @until WHERE seq = @seq"),
    complete: db.prepare<object>("DELETE FROM deliveries WHERE id = @id"),
    reschedule: db.prepare<object>(
      `UPDATE deliveries
       SET next_attempt_at = @at, attempts = @attempts, claimed_until = NULL,
           record = json_set(record, '$.attempts', @attempts, '$.nextAttemptAt', @at, '$.lastError', @error)
       WHERE id = @id`,
    ),
    release: db.prepare<object>("UPDATE deliveries SET next_attempt_at = @at, claimed_until = NULL WHERE id = @id"),
    releaseAll: db.prepare("UPDATE deliveries SET claimed_until = NULL WHERE claimed_until IS NOT NULL"),
    nextFree: db.prepare<object, { at: number | null }>(
      "SELECT min(next_attempt_at) AS at FROM deliveries WHERE claimed_until IS NULL OR claimed_until <= @now",
    ),
    nextLeaseEnd: db.prepare<object, { at: number | null }>(
      "SELECT min(claimed_until) AS at FROM deliveries WHERE claimed_until > @now",
    ),
    count: db.prepare<[], { total: number }>("SELECT count(*) AS total FROM deliveries"),
    get: db.prepare<object, DeliveryRow>(
      "SELECT seq, id, webhook_id, next_attempt_at, attempts, record FROM deliveries WHERE id = @id",
    ),
  };
}

/**
 * `DeliveryQueue` of local mode, in the SQLite file (tables in sqlite-delivery-schema.ts): a
 * delivery is durable once `enqueue` resolves, and stays until `complete`.
 *
 * Order: `claimDue` hands out, per webhook, only the oldest due delivery, and none while another
 * delivery of that webhook is claimed, so a webhook receives its deliveries one at a time in the
 * order they were queued. A failed delivery is rescheduled later and does NOT block the ones queued
 * after it: those go ahead (emit order holds for deliveries that succeed first time; a retried
 * delivery arrives after later ones, and receivers order by event id). One failing payload thus
 * never holds a webhook up for the hour its retries take.
 */
export class SqliteDeliveryQueue implements DeliveryQueue {
  private readonly leaseMs: number;
  private readonly listeners = new Set<() => void>();
  private readonly statements: ReturnType<typeof prepare>;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteDeliveryQueueOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 60_000;
    this.statements = prepare(db);
  }

  /** Stores the deliveries in one transaction; a delivery id already queued is kept as it is. */
  async enqueue(deliveries: readonly DeliveryRecord[]): Promise<void> {
    if (deliveries.length === 0) return;
    this.db.transaction(() => {
      for (const delivery of deliveries) {
        this.statements.insert.run({
          id: delivery.id,
          webhookId: delivery.webhookId,
          nextAttemptAt: delivery.nextAttemptAt,
          attempts: delivery.attempts,
          record: JSON.stringify(delivery),
        });
      }
    })();
    for (const listener of [...this.listeners]) listener();
  }

  /** Calls `listener` after each `enqueue` commits (the worker wakes up on it). */
  onEnqueue(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /**
   * Claims up to `limit` due deliveries, at most one per webhook, none of a webhook that has a
   * delivery claimed: each webhook's oldest due one, the longest-waiting first.
   */
  claimDue(now: number, limit: number): DeliveryRecord[] {
    if (limit <= 0) return [];
    return this.db.transaction(() => {
      const rows = this.statements.due.all({ now, limit });
      for (const row of rows) this.statements.claim.run({ seq: row.seq, until: now + this.leaseMs });
      return rows.map(toDelivery);
    })();
  }

  /** Forgets a delivery (delivered, dead-lettered or dropped). False when it was not there. */
  complete(id: string): boolean {
    return this.statements.complete.run({ id }).changes > 0;
  }

  /** Releases the claim of a failed attempt: due again at `at`, with `attempts` made so far. */
  reschedule(id: string, at: number, attempts: number, error: string): boolean {
    return this.statements.reschedule.run({ id, at, attempts, error }).changes > 0;
  }

  /** Releases a claim without counting an attempt (Sluice, not the receiver, failed). */
  release(id: string, at: number): boolean {
    return this.statements.release.run({ id, at }).changes > 0;
  }

  /**
   * Releases every claim. Only for a worker starting on a file no other process uses (local mode):
   * the claims it finds were left by a process that stopped, so it need not wait for their leases.
   */
  releaseAllClaims(): number {
    return this.statements.releaseAll.run().changes;
  }

  /**
   * When something may next become claimable: the earliest due time of an unclaimed delivery, or
   * the earliest end of a lease; undefined when the queue is empty. May be `<= now` while a
   * webhook's due delivery waits behind its claimed one.
   */
  nextWakeAt(now: number): number | undefined {
    const free = this.statements.nextFree.get({ now })?.at ?? undefined;
    const lease = this.statements.nextLeaseEnd.get({ now })?.at ?? undefined;
    if (free === undefined) return lease;
    return lease === undefined ? free : Math.min(free, lease);
  }

  /** Deliveries waiting or being attempted. */
  size(): number {
    return this.statements.count.get()?.total ?? 0;
  }

  /** One queued delivery, or undefined (for tests and diagnostics). */
  get(id: string): DeliveryRecord | undefined {
    const row = this.statements.get.get({ id });
    return row && toDelivery(row);
  }
}
