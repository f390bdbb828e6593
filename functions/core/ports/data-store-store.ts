/** A workspace's named key-value store (`ds_`), reached by components through `data_store` props. */
export interface DataStoreRecord {
  /** `ds_` id. */
  id: string;
  workspaceId: string;
  /** Unique within the workspace: a prop configured `{"name": ...}` finds (or creates) the store by it. */
  name: string;
  /** Epoch ms. */
  createdAt: number;
}

/** One record of a store; `value` is JSON text. */
export interface DataStoreEntry {
  key: string;
  value: string;
  /** Epoch ms after which the record is gone; absent: it never expires. */
  expiresAt?: number;
}

/** What `putEntry` does with the record's expiry: a time (epoch ms), none (`null`), or the one it has (`"keep"`). */
export type EntryExpiry = number | null | "keep";

/** One page of a store's records in key order. */
export interface EntryPage {
  entries: DataStoreEntry[];
  /** The last key of this page when more may follow; absent on the last page. */
  nextAfter?: string;
}

/**
 * The data stores of every workspace and their records. Records whose `expiresAt` is at or before
 * the `nowMs` a call passes count as absent everywhere (read, listed, counted, overwritten), whether
 * or not the adapter has removed them yet. Adapters: `SqliteDataStoreStore`, `DynamoDbDataStoreStore`.
 */
export interface DataStoreStore {
  /**
   * The workspace's store named `candidate.name`; created as `candidate` when there is none.
   * @throws DomainError `conflict` when the workspace has `maxStores` stores already and none of that name.
   */
  findOrCreateStore(candidate: DataStoreRecord, maxStores: number): Promise<DataStoreRecord>;
  getStore(id: string): Promise<DataStoreRecord | undefined>;
  /** The workspace's stores, by name (a workspace has at most the `maxStores` given on create). */
  listStores(workspaceId: string): Promise<DataStoreRecord[]>;
  /** Removes the store and all its records. Removing a store that is gone succeeds. */
  deleteStore(id: string): Promise<void>;

  getEntry(storeId: string, key: string, nowMs: number): Promise<DataStoreEntry | undefined>;
  /**
   * Writes one record. `"full"` (nothing written) when the key is new and the store holds
   * `maxEntries` live records already; `"gone"` when the store does not exist (any more).
   */
  putEntry(
    storeId: string,
    entry: { key: string; value: string; expiry: EntryExpiry },
    nowMs: number,
    maxEntries: number,
  ): Promise<"stored" | "full" | "gone">;
  /** Sets (or with `null` removes) a live record's expiry; false when there is no such record. */
  setExpiry(storeId: string, key: string, expiresAt: number | null, nowMs: number): Promise<boolean>;
  /** Removes one record; false when there was no live record. */
  deleteEntry(storeId: string, key: string, nowMs: number): Promise<boolean>;
  /**
   * Live records with keys after `after`, in key order (byte order of the keys' UTF-8): at most
   * `limit`, and fewer when their values pass `maxBytes` together (always at least one).
   * With `keysOnly`, values are returned empty.
   */
  listEntries(
    storeId: string,
    nowMs: number,
    page: { after?: string; limit: number; maxBytes: number; keysOnly?: boolean },
  ): Promise<EntryPage>;
  /** How many live records the store holds. */
  countEntries(storeId: string, nowMs: number): Promise<number>;
  /** Removes every record of the store, keeping the store. */
  clearEntries(storeId: string): Promise<void>;
}
