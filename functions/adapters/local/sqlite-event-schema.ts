/**
 * Event tables of `SqliteEventStore` added after the first schema, appended to `MIGRATIONS` in
 * sqlite-database.ts (append only, like every migration there: released text never changes).
 *
 * - `event_counts`: how many events each channel of a source holds, changed in the same
 *   transaction as every insert and delete of events, so `total_count` is one row read however
 *   long the history is. A channel's row goes when its count reaches 0.
 * - `event_sequences.listed`: the same for the channels a list without `event_name` shows (every
 *   channel whose name does not start with `$`), so that count does not grow with the number of
 *   channels either.
 * - `events_listed`: the events of those channels in id order, so a list without `event_name` (and
 *   a stream's catch-up) reads only rows it returns, however many `$logs` lie between them.
 *
 * The counts of the events already stored are computed once, when the migration runs (at the
 * first start after an upgrade, before the server takes requests).
 */
export const EVENT_COUNT_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE event_counts (
    source_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    total INTEGER NOT NULL,
    PRIMARY KEY (source_id, channel)
  ) WITHOUT ROWID;
  INSERT INTO event_counts (source_id, channel, total)
    SELECT source_id, channel, count(*) FROM events GROUP BY source_id, channel;
  ALTER TABLE event_sequences ADD COLUMN listed INTEGER NOT NULL DEFAULT 0;
  UPDATE event_sequences SET listed = coalesce((
    SELECT sum(total) FROM event_counts
    WHERE event_counts.source_id = event_sequences.source_id AND substr(event_counts.channel, 1, 1) <> '$'
  ), 0);
  CREATE INDEX events_listed ON events (source_id, ms, n) WHERE substr(channel, 1, 1) <> '$';
  `,
];
