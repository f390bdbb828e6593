import { conflict } from "#core/errors";
import type {
  DataStoreEntry,
  DataStoreRecord,
  DataStoreStore,
  EntryExpiry,
  EntryPage,
} from "#core/ports/data-store-store";
import type { SqliteDatabase } from "./sqlite-database.ts";

interface StoreRow {
  id: string;
  workspace_id: string;
  name: string;
  created_at: number;
  entries: number;
}

interface EntryRow {
  key: string;
  value: string;
  expires_at: number | null;
}

const toStore = (row: StoreRow): DataStoreRecord => ({
  id: row.id,
  workspaceId: row.workspace_id,
  name: row.name,
  createdAt: row.created_at,
});

function toEntry(row: EntryRow): DataStoreEntry {
  const entry: DataStoreEntry = { key: row.key, value: row.value };
  if (row.expires_at !== null) entry.expiresAt = row.expires_at;
  return entry;
}

/** A record expired at `now` is no record: every read filters on it. */
const LIVE = "(expires_at IS NULL OR expires_at > @now)";

/**
 * `DataStoreStore` on the local SQLite file. Each write is one transaction. A new key is checked
 * against the store's row count (`entries`, kept by triggers); a store at its limit has its expired
 * rows swept first, so the limit counts live records exactly.
 */
export class SqliteDataStoreStore implements DataStoreStore {
  private readonly statements;
  private readonly findOrCreate;
  private readonly put;

  constructor(db: SqliteDatabase) {
    const statements = {
      byId: db.prepare<[string], StoreRow>("SELECT * FROM data_stores WHERE id = ?"),
      byName: db.prepare<[string, string], StoreRow>("SELECT * FROM data_stores WHERE workspace_id = ? AND name = ?"),
      byWorkspace: db.prepare<[string], StoreRow>("SELECT * FROM data_stores WHERE workspace_id = ? ORDER BY name"),
      countStores: db.prepare<[string], { n: number }>("SELECT count(*) AS n FROM data_stores WHERE workspace_id = ?"),
      insertStore: db.prepare(
        "INSERT INTO data_stores (id, workspace_id, name, created_at) VALUES (@id, @workspaceId, @name, @createdAt)",
      ),
      deleteStore: db.prepare<[string]>("DELETE FROM data_stores WHERE id = ?"),
      entry: db.prepare<{ store: string; key: string }, EntryRow>(
        "SELECT key, value, expires_at FROM data_store_entries WHERE store_id = @store AND key = @key",
      ),
      liveEntry: db.prepare<{ store: string; key: string; now: number }, EntryRow>(
        `SELECT key, value, expires_at FROM data_store_entries WHERE store_id = @store AND key = @key AND ${LIVE}`,
      ),
      sweep: db.prepare<{ store: string; now: number }>(
        "DELETE FROM data_store_entries WHERE store_id = @store AND expires_at IS NOT NULL AND expires_at <= @now",
      ),
      count: db.prepare<{ store: string; now: number }, { n: number }>(
        `SELECT count(*) AS n FROM data_store_entries WHERE store_id = @store AND ${LIVE}`,
      ),
      // Insert and update apart (not an upsert): the insert trigger counts only new rows.
      insertEntry: db.prepare(
        "INSERT INTO data_store_entries (store_id, key, value, expires_at) VALUES (@store, @key, @value, @expiresAt)",
      ),
      updateEntry: db.prepare(
        "UPDATE data_store_entries SET value = @value, expires_at = @expiresAt WHERE store_id = @store AND key = @key",
      ),
      setExpiry: db.prepare<{ store: string; key: string; now: number; expiresAt: number | null }>(
        `UPDATE data_store_entries SET expires_at = @expiresAt WHERE store_id = @store AND key = @key AND ${LIVE}`,
      ),
      deleteEntry: db.prepare<{ store: string; key: string }>(
        "DELETE FROM data_store_entries WHERE store_id = @store AND key = @key",
      ),
      page: db.prepare<{ store: string; now: number; after: string | null; limit: number }, EntryRow>(
        `SELECT key, value, expires_at FROM data_store_entries
         WHERE store_id = @store AND (@after IS NULL OR key > @after) AND ${LIVE}
         ORDER BY key LIMIT @limit`,
      ),
      keyPage: db.prepare<{ store: string; now: number; after: string | null; limit: number }, EntryRow>(
        `SELECT key, '' AS value, expires_at FROM data_store_entries
         WHERE store_id = @store AND (@after IS NULL OR key > @after) AND ${LIVE}
         ORDER BY key LIMIT @limit`,
      ),
      clear: db.prepare<[string]>("DELETE FROM data_store_entries WHERE store_id = ?"),
    };
    this.statements = statements;
    this.findOrCreate = db.transaction((candidate: DataStoreRecord, maxStores: number): DataStoreRecord => {
      const found = statements.byName.get(candidate.workspaceId, candidate.name);
      if (found) return toStore(found);
      const count = statements.countStores.get(candidate.workspaceId)?.n ?? 0;
      if (count >= maxStores) {
        throw conflict(
          `the workspace has ${count} data stores, its limit: delete one before creating "${candidate.name}"`,
        );
      }
      statements.insertStore.run(candidate);
      return candidate;
    });
    this.put = db.transaction(
      (store: string, entry: { key: string; value: string; expiry: EntryExpiry }, now: number, max: number) => {
        const row = statements.byId.get(store);
        if (!row) return "gone" as const;
        const existing = statements.entry.get({ store, key: entry.key });
        const live = existing !== undefined && (existing.expires_at === null || existing.expires_at > now);
        const expiresAt = entry.expiry === "keep" ? (live ? (existing?.expires_at ?? null) : null) : entry.expiry;
        const values = { store, key: entry.key, value: entry.value, expiresAt };
        // An expired row of the key is replaced in place: it was counted when it was new.
        if (existing) {
          statements.updateEntry.run(values);
          return "stored" as const;
        }
        if (row.entries >= max) {
          statements.sweep.run({ store, now });
          if ((statements.byId.get(store)?.entries ?? 0) >= max) return "full" as const;
        }
        statements.insertEntry.run(values);
        return "stored" as const;
      },
    );
  }

  async findOrCreateStore(candidate: DataStoreRecord, maxStores: number): Promise<DataStoreRecord> {
    return this.findOrCreate(candidate, maxStores);
  }

  async getStore(id: string): Promise<DataStoreRecord | undefined> {
    const row = this.statements.byId.get(id);
    return row && toStore(row);
  }

  async listStores(workspaceId: string): Promise<DataStoreRecord[]> {
    return this.statements.byWorkspace.all(workspaceId).map(toStore);
  }

  async deleteStore(id: string): Promise<void> {
    this.statements.deleteStore.run(id);
  }

  async getEntry(storeId: string, key: string, nowMs: number): Promise<DataStoreEntry | undefined> {
    const row = this.statements.liveEntry.get({ store: storeId, key, now: nowMs });
    return row && toEntry(row);
  }

  async putEntry(
    storeId: string,
    entry: { key: string; value: string; expiry: EntryExpiry },
    nowMs: number,
    maxEntries: number,
  ): Promise<"stored" | "full" | "gone"> {
    return this.put(storeId, entry, nowMs, maxEntries);
  }

  async setExpiry(storeId: string, key: string, expiresAt: number | null, nowMs: number): Promise<boolean> {
    return this.statements.setExpiry.run({ store: storeId, key, now: nowMs, expiresAt }).changes > 0;
  }

  async deleteEntry(storeId: string, key: string, nowMs: number): Promise<boolean> {
    const live = this.statements.liveEntry.get({ store: storeId, key, now: nowMs }) !== undefined;
    this.statements.deleteEntry.run({ store: storeId, key });
    return live;
  }

  async listEntries(
    storeId: string,
    nowMs: number,
    page: { after?: string; limit: number; maxBytes: number; keysOnly?: boolean },
  ): Promise<EntryPage> {
    const statement = page.keysOnly === true ? this.statements.keyPage : this.statements.page;
    // One more than asked: whether a next page exists.
    const rows = statement.all({ store: storeId, now: nowMs, after: page.after ?? null, limit: page.limit + 1 });
    const entries: DataStoreEntry[] = [];
    let bytes = 0;
    for (const row of rows) {
      if (entries.length === page.limit || (entries.length > 0 && bytes + Buffer.byteLength(row.value) > page.maxBytes))
        break;
      bytes += Buffer.byteLength(row.value);
      entries.push(toEntry(row));
    }
    const last = entries.at(-1);
    return entries.length < rows.length && last ? { entries, nextAfter: last.key } : { entries };
  }

  async countEntries(storeId: string, nowMs: number): Promise<number> {
    return this.statements.count.get({ store: storeId, now: nowMs })?.n ?? 0;
  }

  async clearEntries(storeId: string): Promise<void> {
    this.statements.clear.run(storeId);
  }
}
