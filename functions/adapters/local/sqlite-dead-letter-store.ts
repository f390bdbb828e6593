import type { Page, PageQuery } from "#core/pagination";
import type { DeadLetterRecord } from "#core/subscription-model";
import type { DeadLetterStore } from "#ports/dead-letter-store";
import type { SqliteDatabase } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";

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
}

function toDeadLetter(row: DeadLetterRow): DeadLetterRecord {
  const deadLetter: DeadLetterRecord = {
    id: row.id,
    webhookId: row.webhook_id,
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
 */
export class SqliteDeadLetterStore implements DeadLetterStore {
  private readonly statements;

  constructor(db: SqliteDatabase) {
    this.statements = {
      put: db.prepare(
        `INSERT OR REPLACE INTO dead_letters (webhook_id, id, user_id, subscription_ids, emitter_id, event_id, channel, payload, attempts, next_attempt_at, created_at, last_error, failed_at)
         VALUES (@webhookId, @id, @userId, @subscriptionIds, @emitterId, @eventId, @channel, @payload, @attempts, @nextAttemptAt, @createdAt, @lastError, @failedAt)`,
      ),
      get: db.prepare<[string, string], DeadLetterRow>("SELECT * FROM dead_letters WHERE webhook_id = ? AND id = ?"),
      delete: db.prepare<[string, string]>("DELETE FROM dead_letters WHERE webhook_id = ? AND id = ?"),
      deleteOf: db.prepare<[string]>("DELETE FROM dead_letters WHERE webhook_id = ?"),
      ofWebhook: pageStatements<DeadLetterRow>(db, "dead_letters", "webhook_id"),
    };
  }

  async putDeadLetter(deadLetter: DeadLetterRecord): Promise<void> {
    this.statements.put.run({
      ...deadLetter,
      subscriptionIds: JSON.stringify(deadLetter.subscriptionIds),
      payload: JSON.stringify(deadLetter.payload),
      lastError: deadLetter.lastError ?? null,
    });
  }

  async getDeadLetter(webhookId: string, id: string): Promise<DeadLetterRecord | undefined> {
    const row = this.statements.get.get(webhookId, id);
    return row && toDeadLetter(row);
  }

  async listDeadLetters(webhookId: string, page: PageQuery): Promise<Page<DeadLetterRecord>> {
    return readPage(this.statements.ofWebhook, webhookId, page, toDeadLetter);
  }

  async deleteDeadLetter(webhookId: string, id: string): Promise<boolean> {
    return this.statements.delete.run(webhookId, id).changes > 0;
  }

  async deleteDeadLettersOf(webhookId: string): Promise<void> {
    this.statements.deleteOf.run(webhookId);
  }
}
