/**
 * The tables of routing (webhooks, subscriptions, auto subscriptions, dead letters), one migration
 * to append to `MIGRATIONS` in `sqlite-database.ts`. No foreign keys, like the other stores: each
 * is used on its own and the core checks ownership and cascades.
 */
export const SUBSCRIPTION_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    url TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    sealed_signing_secret TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX webhooks_by_user ON webhooks (user_id, id);
  CREATE TABLE subscriptions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    emitter_id TEXT NOT NULL,
    emitter_kind TEXT NOT NULL,
    emitter_key TEXT NOT NULL,
    listener_id TEXT NOT NULL,
    listener_kind TEXT NOT NULL,
    event_name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (emitter_key, event_name, listener_id)
  );
  CREATE INDEX subscriptions_by_user ON subscriptions (user_id, id);
  CREATE INDEX subscriptions_by_workspace ON subscriptions (workspace_id, id);
  CREATE INDEX subscriptions_by_listener ON subscriptions (listener_id);
  CREATE TABLE auto_subscriptions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    event_name TEXT NOT NULL,
    listener_id TEXT NOT NULL,
    listener_kind TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (user_id, event_name, listener_id)
  );
  CREATE INDEX auto_subscriptions_by_listener ON auto_subscriptions (listener_id);
  CREATE TABLE dead_letters (
    webhook_id TEXT NOT NULL,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    subscription_ids TEXT NOT NULL,
    emitter_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    last_error TEXT,
    failed_at INTEGER NOT NULL,
    PRIMARY KEY (webhook_id, id)
  );
  `,
];

/**
 * How many dead letters each webhook has, changed in the same transaction as every put and delete
 * of one (sqlite-dead-letter-store.ts), so a list's `total_count` is one row read however many a
 * receiver that stayed down left. The counts of the dead letters already stored are computed once,
 * when the migration runs.
 */
export const DEAD_LETTER_COUNT_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE dead_letter_counts (
    webhook_id TEXT PRIMARY KEY,
    total INTEGER NOT NULL
  ) WITHOUT ROWID;
  INSERT INTO dead_letter_counts (webhook_id, total)
    SELECT webhook_id, count(*) FROM dead_letters GROUP BY webhook_id;
  `,
];

/**
 * The target of a dead letter that is not a webhook's (a workflow's `$.send.http` or `$.send.s3`,
 * kept under the workflow's `p_` in `webhook_id`), as JSON; NULL for a webhook's, whose target is
 * its `webhook_id`. Appended at the end of `MIGRATIONS`.
 */
export const SEND_DEAD_LETTER_MIGRATIONS: readonly string[] = ["ALTER TABLE dead_letters ADD COLUMN target TEXT;"];
