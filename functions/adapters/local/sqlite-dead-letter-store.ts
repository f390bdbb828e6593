import type { Page, PageQuery } from "#core/pagination";
import type { DeadLetterStore } from "#core/ports/dead-letter-store";
import { type DeadLetterRecord, destinationOf } from "#core/subscription-model";
import { nextTurn } from "./event-loop.ts";
import type { SqliteDatabase } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";

export interface SqliteDeadLetterStoreOptions {
  /**
   * Dead letters removed per transaction when a webhook is deleted, one chunk per turn of the
   * event loop. @default 500
   */
  chunkRows?: number;
}

interface DeadLetterRow {
  webhook_id: string;
  id: string;
  user_id: string;
  subscription_ids: string;
  emitter_id: string;
  event_id: string;
  channel: string;
  payload: string;
  attempts: number;
  next_attempt_at: number;
  created_at: number;
  last_error: string | null;
  failed_at: number;
  /** JSON of a send's target; null for a webhook's. */
  target: string | null;
}

function toDeadLetter(row: DeadLetterRow): DeadLetterRecord {
  const deadLetter: DeadLetterRecord = {
    id: row.id,
    target: row.target === null ? { kind: "webhook", webhookId: row.webhook_id } : JSON.parse(row.target),
    subscriptionIds: JSON.parse(row.subscription_ids),
    emitterId: row.emitter_id,
    eventId: row.event_id,
    channel: row.channel,
    payload: JSON.parse(row.payload),
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    createdAt: row.created_at,
    userId: row.user_id,
    failedAt: row.failed_at,
  };
  if (row.last_error !== null) deadLetter.lastError = row.last_error;
  return deadLetter;
}

/**
 * `DeadLetterStore` on the local SQLite file: table `dead_letters`, keyed by (webhook_id, id), so
 * a webhook's list is a range of the primary key. Putting a dead letter again (a replay that
 * failed again) replaces it.
 *
 * A receiver that stays down leaves a dead letter per event, as many as a tenant's history, and
 * local mode serves every tenant from one thread: each webhook's count is kept in
 * `dead_letter_counts` by the transactions that put and delete dead letters (a list's total is one
 * row read), and a webhook's dead letters are deleted `chunkRows` at a time, a turn of the event
 * loop between chunks.
 */
export class SqliteDeadLetterStore implements DeadLetterStore {
  private readonly statements;
  private readonly chunkRows: number;
  private readonly putCounted;
  private readonly deleteCounted;
  private readonly deleteChunk;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteDeadLetterStoreOptions = {},
  ) {
    this.chunkRows = Math.max(1, Math.floor(options.chunkRows ?? 500));
    this.statements = {
      put: db.prepare(
        `INSERT OR REPLACE INTO dead_letters (webhook_id, id, user_id, subscription_ids, emitter_id, event_id, channel, payload, attempts, next_attempt_at, created_at, last_error, failed_at, target)
         VALUES (@webhookId, @id, @userId, @subscriptionIds, @emitterId, @eventId, @channel, @payload, @attempts, @nextAttemptAt, @createdAt, @lastError, @failedAt, @target)`,
      ),
      get: db.prepare<[string, string], DeadLetterRow>("SELECT * FROM dead_letters WHERE webhook_id = ? AND id = ?"),
      delete: db.prepare<[string, string]>("DELETE FROM dead_letters WHERE webhook_id = ? AND id = ?"),
      exists: db.prepare<[string, string], { found: number }>(
        "SELECT 1 AS found FROM dead_letters WHERE webhook_id = ? AND id = ?",
      ),
      deleteChunkOf: db.prepare<[string]>(
        `DELETE FROM dead_letters WHERE rowid IN (SELECT rowid FROM dead_letters WHERE webhook_id = ? LIMIT ${this.chunkRows})`,
      ),
      addCount: db.prepare<[string, number]>(
        `INSERT INTO dead_letter_counts (webhook_id, total) VALUES (?, ?)
         ON CONFLICT (webhook_id) DO UPDATE SET total = total + excluded.total`,
      ),
      count: db.prepare<[string], { total: number }>("SELECT total FROM dead_letter_counts WHERE webhook_id = ?"),
      dropCount: db.prepare<[string]>("DELETE FROM dead_letter_counts WHERE webhook_id = ? AND total <= 0"),
      ofWebhook: pageStatements<DeadLetterRow>(db, "dead_letters", "webhook_id"),
    };
    const s = this.statements;
    this.putCounted = db.transaction((row: Record<string, unknown>, webhookId: string, id: string) => {
      const replaces = s.exists.get(webhookId, id) !== undefined;
      s.put.run(row);
      if (!replaces) s.addCount.run(webhookId, 1);
    });
    this.deleteCounted = db.transaction((webhookId: string, id: string): boolean => {
      const removed = s.delete.run(webhookId, id).changes;
      if (removed > 0) this.subtract(webhookId, removed);
      return removed > 0;
    });
    this.deleteChunk = db.transaction((webhookId: string): number => {
      const removed = s.deleteChunkOf.run(webhookId).changes;
      if (removed > 0) this.subtract(webhookId, removed);
      return removed;
    });
  }

  private subtract(webhookId: string, count: number): void {
    this.statements.addCount.run(webhookId, -count);
    this.statements.dropCount.run(webhookId);
  }

  async putDeadLetter(deadLetter: DeadLetterRecord): Promise<void> {
    const { target, ...rest } = deadLetter;
    const row = {
      ...rest,
      webhookId: destinationOf(deadLetter),
      target: target.kind === "webhook" ? null : JSON.stringify(target),
      subscriptionIds: JSON.stringify(deadLetter.subscriptionIds),
      payload: JSON.stringify(deadLetter.payload),
      lastError: deadLetter.lastError ?? null,
    };
    this.putCounted(row, destinationOf(deadLetter), deadLetter.id);
  }

  async getDeadLetter(webhookId: string, id: string): Promise<DeadLetterRecord | undefined> {
    const row = this.statements.get.get(webhookId, id);
    return row && toDeadLetter(row);
  }

  async listDeadLetters(webhookId: string, page: PageQuery): Promise<Page<DeadLetterRecord>> {
    return readPage(this.statements.ofWebhook, webhookId, page, toDeadLetter, (id) =>
      Math.max(0, this.statements.count.get(id)?.total ?? 0),
    );
  }

  async deleteDeadLetter(webhookId: string, id: string): Promise<boolean> {
    return this.deleteCounted(webhookId, id);
  }

  async deleteDeadLettersOf(webhookId: string): Promise<void> {
    for (;;) {
      if (!this.db.open) throw new Error("the dead letter store was closed before the deletion finished");
      if (this.deleteChunk(webhookId) < this.chunkRows) return;
      await nextTurn();
    }
  }
}
