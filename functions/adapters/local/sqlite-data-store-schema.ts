/**
 * Data stores and their records (`SqliteDataStoreStore`), appended to `MIGRATIONS` in
 * sqlite-database.ts (append only: released text never changes).
 *
 * Names are unique per workspace (a prop finds its store by name). Records are keyed by store and
 * key, in key byte order (SQLite's BINARY collation compares the UTF-8 bytes, as DynamoDB does);
 * deleting a store deletes its records. `expires_at` is epoch ms or NULL; the partial index finds a
 * store's expired records when a write sweeps them. `entries` counts a store's rows (expired ones
 * until they are swept), kept by triggers, so a new key's write checks the record limit without
 * counting: only a store at its limit has its expired rows swept and is counted again.
 */
export const DATA_STORE_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE data_stores (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    entries INTEGER NOT NULL DEFAULT 0,
    UNIQUE (workspace_id, name)
  );
  CREATE TABLE data_store_entries (
    store_id TEXT NOT NULL REFERENCES data_stores (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (store_id, key)
  ) WITHOUT ROWID;
  CREATE INDEX data_store_entries_expiry ON data_store_entries (store_id, expires_at) WHERE expires_at IS NOT NULL;
  CREATE TRIGGER data_store_entries_in AFTER INSERT ON data_store_entries BEGIN
    UPDATE data_stores SET entries = entries + 1 WHERE id = NEW.store_id;
  END;
  CREATE TRIGGER data_store_entries_out AFTER DELETE ON data_store_entries BEGIN
    UPDATE data_stores SET entries = entries - 1 WHERE id = OLD.store_id;
  END;
  `,
];
