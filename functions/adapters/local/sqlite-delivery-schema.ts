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
