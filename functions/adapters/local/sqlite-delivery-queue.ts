import type { DeliveryQueue } from "#core/ports/delivery-queue";
import { type DeliveryRecord, destinationOf, storedDelivery } from "#core/subscription-model";
import type { SqliteDatabase } from "./sqlite-database.ts";

export interface SqliteDeliveryQueueOptions {
  /**
   * How long a claim holds a delivery. A claim not completed, rescheduled or released by then (the
   * attempt never ended) makes the delivery due again. Keep it above the attempt timeout.
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

/** What `complete`, `reschedule` and `release` learn of the row they changed. */
interface ChangedRow {
  webhook_id: string;
  attempts: number;
}

/** The record, with a row queued by a version before workflows read as a webhook delivery (`storedDelivery`). */
const toDelivery = (row: DeliveryRow): DeliveryRecord => ({
  ...storedDelivery(JSON.parse(row.record)),
  attempts: row.attempts,
  nextAttemptAt: row.next_attempt_at,
});

const bySeq = (a: DeliveryRow, b: DeliveryRow) => a.seq - b.seq;
/** Batches by their first delivery: the earliest due, then the earliest queued. */
const longestWaitingFirst = (a: DeliveryRow[], b: DeliveryRow[]) => {
  const [x, y] = [a[0] as DeliveryRow, b[0] as DeliveryRow];
  return x.next_attempt_at - y.next_attempt_at || x.seq - y.seq;
};

const COLUMNS = "seq, id, webhook_id, next_attempt_at, attempts, record";

/**
 * Retries due at once that a claim considers per webhook, the earliest due first; it hands out the
 * oldest queued of those. More are due together only after a long outage, when order is moot.
 */
const RETRIES_CONSIDERED = 256;

/**
 * A webhook's oldest due deliveries, in two reads that each stop at what they need: the ones never
 * attempted (due once queued) in queue order, and the retries due now in due order (sorted by queue
 * order by the caller). LIMIT is a literal (SQLite plans a bound one several times slower), so
 * there is one pair of statements per batch size.
 */
function prepareDue(db: SqliteDatabase, limit: number) {
  return {
    first: db.prepare<object, DeliveryRow>(
      `SELECT ${COLUMNS} FROM deliveries INDEXED BY deliveries_first_by_webhook
       WHERE webhook_id = @webhookId AND attempts = 0 AND next_attempt_at <= @now
       ORDER BY seq LIMIT ${limit}`,
    ),
    retries: db.prepare<object, DeliveryRow>(
      `SELECT ${COLUMNS} FROM deliveries INDEXED BY deliveries_retry_by_webhook
       WHERE webhook_id = @webhookId AND attempts > 0 AND next_attempt_at <= @now
       ORDER BY next_attempt_at LIMIT ${Math.max(limit, RETRIES_CONSIDERED)}`,
    ),
  };
}

function prepare(db: SqliteDatabase) {
  return {
    insert: db.prepare<object>(
      `INSERT OR IGNORE INTO deliveries (id, webhook_id, next_attempt_at, claimed_until, attempts, record)
       VALUES (@id, @webhookId, @nextAttemptAt, NULL, @attempts, @record)`,
    ),
    // When the webhook's next delivery is due: the retries' index has the earliest first; deliveries
    // never attempted are due once queued, so the ones not due (released) are few to read.
    nextFirst: db.prepare<object, { at: number | null }>(
      `SELECT min(next_attempt_at) AS at FROM deliveries INDEXED BY deliveries_first_by_webhook
       WHERE webhook_id = @webhookId AND attempts = 0`,
    ),
    // ORDER BY ... LIMIT 1 rather than min(): reads one index entry, not every retry of the webhook.
    nextRetry: db.prepare<object, { at: number }>(
      `SELECT next_attempt_at AS at FROM deliveries INDEXED BY deliveries_retry_by_webhook
       WHERE webhook_id = @webhookId AND attempts > 0 ORDER BY next_attempt_at LIMIT 1`,
    ),
    complete: db.prepare<object, ChangedRow>("DELETE FROM deliveries WHERE id = @id RETURNING webhook_id, attempts"),
    reschedule: db.prepare<object, ChangedRow>(
      `UPDATE deliveries
       SET next_attempt_at = @at, attempts = @attempts, claimed_until = NULL,
           record = json_set(record, '$.attempts', @attempts, '$.nextAttemptAt', @at, '$.lastError', @error)
       WHERE id = @id RETURNING webhook_id, attempts`,
    ),
    release: db.prepare<object, ChangedRow>(
      "UPDATE deliveries SET next_attempt_at = @at, claimed_until = NULL WHERE id = @id RETURNING webhook_id, attempts",
    ),
    releaseAll: db.prepare("UPDATE deliveries SET claimed_until = NULL WHERE claimed_until IS NOT NULL"),
    webhooks: db.prepare<[], { webhook_id: string }>("SELECT DISTINCT webhook_id FROM deliveries"),
    leases: db.prepare<[], { webhook_id: string; lease: number }>(
      `SELECT webhook_id, max(claimed_until) AS lease FROM deliveries
       WHERE claimed_until IS NOT NULL GROUP BY webhook_id`,
    ),
    count: db.prepare<[], { total: number }>("SELECT count(*) AS total FROM deliveries"),
    get: db.prepare<object, DeliveryRow>(`SELECT ${COLUMNS} FROM deliveries WHERE id = @id`),
  };
}

/** What the queue knows of one webhook with deliveries queued, kept beside the table. */
interface WebhookState {
  /** Deliveries of the webhook this queue has claimed and not yet seen completed or released. */
  held: number;
  /** End of the latest lease on the webhook's deliveries (this queue's, or one found in the file); 0: none. */
  leaseEnd: number;
  /**
   * Nothing of the webhook is claimable before this (a lower bound: the earliest due time seen);
   * undefined when not known, which reads as "look now".
   */
  dueAt: number | undefined;
  /**
   * None of the webhook's retries is due before this (a lower bound; +Infinity when it has none);
   * undefined when not known. Spares a claim the read of the retries while none is due.
   */
  retryAt: number | undefined;
}

/**
 * `DeliveryQueue` of local mode, in the SQLite file (tables in sqlite-delivery-schema.ts): a
 * delivery is durable once `enqueue` resolves, and stays until `complete`.
 *
 * A destination is a webhook, or a workflow for the deliveries of its `$.send.http` and `$.send.s3`
 * (their `p_` in the `webhook_id` column): "webhook" below reads "destination".
 *
 * Order: `claimBatches` hands out, per webhook, its oldest due deliveries (by queue order), and none
 * while a delivery of that webhook is claimed, so a webhook receives its deliveries one batch at a
 * time, in the order they were queued (the worker sends a batch one by one). A failed delivery is
 * rescheduled later and does NOT block the ones queued after it: those go ahead (emit order holds
 * for deliveries that succeed first time; a retried delivery arrives after later ones, and
 * receivers order by event id). One failing payload thus never holds a webhook up for the hour its
 * retries take.
 *
 * Claims live in memory: a claim writes nothing, and a process that stops leaves no claim behind,
 * so whatever it was attempting is due again when the next one starts (`releaseAllClaims` still
 * clears the `claimed_until` leases an older version wrote; until then they hold their webhook).
 *
 * Cost: the queue keeps, in memory, the webhooks that have deliveries queued, their claims, and
 * when their next delivery may be due (rebuilt from the table when constructed). A claim reads only
 * the webhooks that may have something due, each through the indexes of `DELIVERY_CLAIM_INDEXES`
 * down to the rows it hands out: the size of the backlog does not enter. It assumes it is the only
 * writer of its table (local mode: one process per file).
 */
export class SqliteDeliveryQueue implements DeliveryQueue {
  readonly leaseMs: number;
  private readonly listeners = new Set<() => void>();
  private readonly statements: ReturnType<typeof prepare>;
  private readonly webhooks = new Map<string, WebhookState>();
  /** Claimed deliveries: id → webhook id. */
  private readonly held = new Map<string, string>();
  private readonly dueStatements = new Map<number, ReturnType<typeof prepareDue>>();
  private readonly insertAll: (deliveries: readonly DeliveryRecord[]) => void;
  /** Deliveries completed whose rows are not deleted yet: they go with the next write or read of the queue. */
  private completed: string[] = [];
  private readonly deleteCompleted: (ids: readonly string[]) => void;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteDeliveryQueueOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 60_000;
    this.statements = prepare(db);
    const deleteRows = (ids: readonly string[]) => {
      for (const id of ids) this.statements.complete.get({ id });
    };
    this.deleteCompleted = db.transaction(deleteRows);
    this.insertAll = db.transaction((deliveries: readonly DeliveryRecord[]) => {
      // Completions first: a delivery queued again after it was delivered (a dispatch made again) is
      // queued again, as when its row was already gone.
      deleteRows(this.completed);
      for (const delivery of deliveries) {
        // The `webhook_id` column holds the destination: a webhook's `wh_` or a sending workflow's `p_`.
        const destinationId = destinationOf(delivery);
        const { changes } = this.statements.insert.run({
          id: delivery.id,
          webhookId: destinationId,
          nextAttemptAt: delivery.nextAttemptAt,
          attempts: delivery.attempts,
          record: JSON.stringify(delivery),
        });
        if (changes > 0) this.noteDue(destinationId, delivery.nextAttemptAt, delivery.attempts > 0);
      }
    });
    for (const { webhook_id } of this.statements.webhooks.all()) {
      this.webhooks.set(webhook_id, { held: 0, leaseEnd: 0, dueAt: undefined, retryAt: undefined });
    }
    // Claims in the file when it is opened belong to another (or a stopped) process: they hold
    // their webhook until their lease ends, or until `releaseAllClaims`.
    for (const { webhook_id, lease } of this.statements.leases.all()) {
      const state = this.webhooks.get(webhook_id);
      if (state) state.leaseEnd = lease;
    }
  }

  /** Stores the deliveries in one transaction; a delivery id already queued is kept as it is. */
  async enqueue(deliveries: readonly DeliveryRecord[]): Promise<void> {
    if (deliveries.length === 0) return;
    this.insertAll(deliveries);
    this.completed = [];
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
   * Claims the due deliveries of up to `webhooks` webhooks, none of a webhook that has a delivery
   * claimed: per webhook, its oldest `perWebhook` due ones in queue order (one batch, to be sent
   * one at a time in that order). The webhooks whose oldest due delivery waited longest go first.
   */
  claimBatches(now: number, webhooks: number, perWebhook: number): DeliveryRecord[][] {
    const limit = Math.floor(perWebhook);
    if (webhooks <= 0 || limit <= 0) return [];
    this.flush();
    const batches: DeliveryRow[][] = [];
    for (const [webhookId, state] of this.webhooks) {
      if (state.leaseEnd > now || (state.dueAt !== undefined && state.dueAt > now)) continue;
      const rows = this.dueRows(webhookId, state, now, limit);
      if (rows.length > 0) batches.push(rows);
      else this.settle(webhookId, state, now);
    }
    if (batches.length === 0) return [];
    if (batches.length > 1) batches.sort(longestWaitingFirst);
    if (batches.length > webhooks) {
      // Left for the next claim: due already (so that the worker looks again without a lookup).
      for (const rows of batches.splice(webhooks)) {
        const head = rows[0] as DeliveryRow;
        this.state(head.webhook_id).dueAt = head.next_attempt_at;
      }
    }
    const until = now + this.leaseMs;
    return batches.map((rows) => {
      const webhookId = (rows[0] as DeliveryRow).webhook_id;
      const state = this.state(webhookId);
      for (const row of rows) {
        if (!this.held.has(row.id)) state.held++;
        this.held.set(row.id, webhookId);
      }
      state.leaseEnd = until;
      state.dueAt = undefined;
      return rows.map(toDelivery);
    });
  }

  /** `claimBatches` with batches of one: up to `limit` deliveries, each of another webhook. */
  claimDue(now: number, limit: number): DeliveryRecord[] {
    return this.claimBatches(now, limit, 1).flat();
  }

  /**
   * Forgets a claimed delivery (delivered, dead-lettered or dropped). Its row is deleted with the
   * queue's next write or read (`enqueue`, `claimBatches`, `flush`, ...), in one transaction with
   * the other completions since: a transaction per worker look rather than per delivery. Until then
   * a crash leaves the row, and the delivery is made again after a restart under the same id, as
   * for a crash during its attempt (docs/durability.md). A delivery not claimed here is deleted at
   * once. False when it was not there.
   */
  complete(id: string): boolean {
    if (!this.held.has(id)) return this.statements.complete.get({ id }) !== undefined;
    this.completed.push(id);
    this.unhold(id);
    return true;
  }

  /**
   * Deletes the rows of the deliveries completed so far (also called before the database closes).
   * Throws when the database fails; they are kept for the next try.
   */
  flush(): void {
    if (this.completed.length === 0) return;
    this.deleteCompleted(this.completed);
    this.completed = [];
  }

  /** Releases the claim of a failed attempt: due again at `at`, with `attempts` made so far. */
  reschedule(id: string, at: number, attempts: number, error: string): boolean {
    const row = this.statements.reschedule.get({ id, at, attempts, error });
    this.unhold(id, row, at);
    return row !== undefined;
  }

  /** Releases a claim without counting an attempt (Sluice, not the receiver, failed). */
  release(id: string, at: number): boolean {
    const row = this.statements.release.get({ id, at });
    this.unhold(id, row, at);
    return row !== undefined;
  }

  /**
   * Releases every claim. Only for a worker starting on a file no other process uses (local mode):
   * the claims it finds were left by a process that stopped, so it need not wait for their leases.
   */
  releaseAllClaims(): number {
    const { changes } = this.statements.releaseAll.run();
    const released = changes + this.held.size;
    this.held.clear();
    for (const state of this.webhooks.values()) {
      state.held = 0;
      state.leaseEnd = 0;
      state.dueAt = undefined;
    }
    return released;
  }

  /**
   * When something may next become claimable: the earliest due time of an unclaimed delivery of a
   * webhook without a claim, or the earliest end of a lease; undefined when the queue is empty.
   * `<= now` when a claim left something due (more webhooks due than the claim took).
   */
  nextWakeAt(now: number): number | undefined {
    this.flush();
    let next: number | undefined;
    for (const [webhookId, state] of this.webhooks) {
      let at: number | undefined;
      if (state.leaseEnd > now) at = state.leaseEnd;
      else at = state.dueAt ?? this.settle(webhookId, state, now);
      if (at !== undefined && (next === undefined || at < next)) next = at;
    }
    return next;
  }

  /** Deliveries waiting or being attempted. */
  size(): number {
    this.flush();
    return this.statements.count.get()?.total ?? 0;
  }

  /** One queued delivery, or undefined (for tests and diagnostics). */
  get(id: string): DeliveryRecord | undefined {
    this.flush();
    const row = this.statements.get.get({ id });
    return row && toDelivery(row);
  }

  private state(webhookId: string): WebhookState {
    let state = this.webhooks.get(webhookId);
    if (!state) {
      state = { held: 0, leaseEnd: 0, dueAt: undefined, retryAt: undefined };
      this.webhooks.set(webhookId, state);
    }
    return state;
  }

  /** A delivery of the webhook is due at `at` (queued, rescheduled or released); `retry`: one attempted before. */
  private noteDue(webhookId: string, at: number, retry: boolean): void {
    const known = this.webhooks.get(webhookId);
    if (!known) {
      // Forgotten webhooks had nothing queued: this is all they have.
      this.webhooks.set(webhookId, { held: 0, leaseEnd: 0, dueAt: at, retryAt: retry ? at : Number.POSITIVE_INFINITY });
      return;
    }
    if (known.dueAt !== undefined && at < known.dueAt) known.dueAt = at;
    if (retry && known.retryAt !== undefined && at < known.retryAt) known.retryAt = at;
  }

  /** The webhook's oldest `limit` due, unclaimed deliveries, in queue order. */
  private dueRows(webhookId: string, state: WebhookState, now: number, limit: number): DeliveryRow[] {
    let due = this.dueStatements.get(limit);
    if (!due) {
      due = prepareDue(this.db, limit);
      this.dueStatements.set(limit, due);
    }
    const params = { webhookId, now };
    const first = due.first.all(params);
    if (state.retryAt !== undefined && state.retryAt > now) return first;
    const retries = due.retries.all(params);
    // None due: remember when the first is; some due: they may not all be claimed now, look again.
    state.retryAt = retries.length === 0 ? this.nextRetryAt(webhookId) : undefined;
    if (retries.length === 0) return first;
    return [...first, ...retries].sort(bySeq).slice(0, limit);
  }

  /** When the webhook's earliest retry is due; +Infinity when it has none. */
  private nextRetryAt(webhookId: string): number {
    return this.statements.nextRetry.get({ webhookId })?.at ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Looks up when the webhook's next unclaimed delivery is due and remembers it; forgets a webhook
   * with nothing queued and nothing claimed.
   */
  private settle(webhookId: string, state: WebhookState, now: number): number | undefined {
    const first = this.statements.nextFirst.get({ webhookId })?.at ?? Number.POSITIVE_INFINITY;
    state.retryAt ??= this.nextRetryAt(webhookId);
    const earliest = Math.min(first, state.retryAt);
    const at = earliest === Number.POSITIVE_INFINITY ? undefined : earliest;
    if (at === undefined && state.held === 0 && state.leaseEnd <= now) this.webhooks.delete(webhookId);
    state.dueAt = at ?? Number.POSITIVE_INFINITY;
    return at;
  }

  /** A claim ended (or a delivery changed without one): the webhook may have something due. */
  private unhold(id: string, changed?: ChangedRow, dueAt?: number): void {
    const heldBy = this.held.get(id);
    if (heldBy !== undefined) {
      this.held.delete(id);
      const state = this.webhooks.get(heldBy);
      if (state && --state.held <= 0) {
        state.held = 0;
        state.leaseEnd = 0;
        state.dueAt = undefined;
      }
    }
    if (changed && dueAt !== undefined) this.noteDue(changed.webhook_id, dueAt, changed.attempts > 0);
  }
}
