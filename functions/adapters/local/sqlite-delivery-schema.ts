/**
 * Tables of `SqliteDeliveryQueue`, appended to `MIGRATIONS` in sqlite-database.ts (append only,
 * like every migration there: released text never changes).
 *
 * `seq` is the enqueue order, the order of a webhook's deliveries. `claimed_until` is the lease of
 * a delivery being attempted (NULL when nobody holds it): past it, the delivery is due again, so a
 * crash during an attempt loses nothing. The whole record is kept as JSON; the columns beside it
 * are what the queue selects on.
 */
export const DELIVERY_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    claimed_until INTEGER,
    attempts INTEGER NOT NULL,
    record TEXT NOT NULL
  );
  CREATE INDEX deliveries_by_webhook ON deliveries (webhook_id, seq);
  CREATE INDEX deliveries_by_due ON deliveries (next_attempt_at);
  CREATE INDEX deliveries_claimed ON deliveries (claimed_until) WHERE claimed_until IS NOT NULL;
  `,
];

/**
 * The indexes `SqliteDeliveryQueue.claimBatches` reads a webhook's next due deliveries through,
 * without walking the rest of its backlog:
 * - `deliveries_first_by_webhook`: deliveries not attempted yet (`attempts = 0`), in queue order;
 *   they are due as soon as queued, so the oldest ones come first off the index.
 * - `deliveries_retry_by_webhook`: deliveries waiting for a retry, by due time; only the ones due
 *   now are read (a receiver down for an hour leaves a long tail here that no claim walks).
 * When a webhook's next delivery is due (the worker's sleep) comes from the same two indexes.
 * The first migration's `deliveries_by_webhook` and `deliveries_by_due` are no longer read: dropped,
 * so no write maintains them.
 *
 * Appended at the end of `MIGRATIONS` (after the migrations that follow `DELIVERY_MIGRATIONS`
 * there, never in between: the positions of released migrations are fixed).
 */
export const DELIVERY_CLAIM_INDEXES = `
  CREATE INDEX IF NOT EXISTS deliveries_first_by_webhook ON deliveries (webhook_id, seq) WHERE attempts = 0;
  CREATE INDEX IF NOT EXISTS deliveries_retry_by_webhook ON deliveries (webhook_id, next_attempt_at) WHERE attempts > 0;
  DROP INDEX IF EXISTS deliveries_by_webhook;
  DROP INDEX IF EXISTS deliveries_by_due;
`;
