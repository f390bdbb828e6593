/**
 * What each workspace keeps stored, for the stored-events and stored-bytes quotas
 * (`SqliteUsageStore`), appended to `MIGRATIONS` in sqlite-database.ts (append only, like every
 * migration there: released text never changes).
 *
 * `stored_usage` holds a workspace's totals; `SqliteUsageStore.addStored` adds what its sources
 * append. `stored_sources` names each source's workspace, written on its first addition and kept
 * after the source is deleted, since its events may be removed later. A trigger subtracts every
 * row that leaves `events`, whichever statement removes it (a range delete, a retention sweep, a
 * chunked background delete, deleting a source), in the same transaction: the totals cannot drift
 * from the rows. It adds a negative row when the workspace has none yet (its first addition may
 * still wait for the turn's grouped write), so no subtraction is lost. About 2 µs per removed row. Bytes are the UTF-8 bytes of the row's `event` and
 * `meta` JSON, which is what `addStored` counts.
 *
 * The migration counts what a data dir written by an earlier version holds already.
 */
export const STORED_USAGE_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE stored_usage (
    owner_id TEXT PRIMARY KEY,
    events INTEGER NOT NULL,
    bytes INTEGER NOT NULL
  );
  CREATE TABLE stored_sources (
    source_id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL
  );
  INSERT INTO stored_sources (source_id, owner_id) SELECT id, workspace_id FROM sources;
  INSERT INTO stored_usage (owner_id, events, bytes)
    SELECT s.owner_id, count(*), coalesce(sum(octet_length(e.event) + octet_length(e.meta)), 0)
    FROM events e JOIN stored_sources s ON s.source_id = e.source_id
    GROUP BY s.owner_id;
  CREATE TRIGGER events_leave_stored_usage AFTER DELETE ON events BEGIN
    INSERT INTO stored_usage (owner_id, events, bytes)
      SELECT owner_id, -1, -(octet_length(OLD.event) + octet_length(OLD.meta))
      FROM stored_sources WHERE source_id = OLD.source_id
      ON CONFLICT (owner_id) DO UPDATE SET events = events + excluded.events, bytes = bytes + excluded.bytes;
  END;
  `,
];
