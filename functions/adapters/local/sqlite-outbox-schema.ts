/**
 * Table of `SqliteOutbox`, appended to `MIGRATIONS` in sqlite-database.ts (append only, like every
 * migration there: released text never changes).
 *
 * One row per append of events that is not yet routed: the source, the ms every event of the
 * append shares and the first and last `n` (so the events are `<ms>-<first_n>` to
 * `<ms>-<last_n>`), and when it was appended. Written in the append's own transaction, removed
 * once every delivery and run of its events is queued.
 */
export const OUTBOX_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE event_outbox (
    source_id TEXT NOT NULL,
    ms INTEGER NOT NULL,
    first_n INTEGER NOT NULL,
    last_n INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, ms, first_n)
  ) WITHOUT ROWID;
  `,
];
