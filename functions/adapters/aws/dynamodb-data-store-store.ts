import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandInput,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import { conflict } from "#core/errors";
import type {
  DataStoreEntry,
  DataStoreRecord,
  DataStoreStore,
  EntryExpiry,
  EntryPage,
} from "#core/ports/data-store-store";
import { failedConditionIndexes, isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, countAll, deleteAllMatching, type Item, putAllNew, queryAll } from "./dynamodb-paging.ts";
import { transactDelete, transactWrite } from "./dynamodb-transactions.ts";
import { resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

const ENTRY_PREFIX = SORT_KEY_PREFIX.dataStoreEntry;
/** Only live records: an expired one stays until DynamoDB's TTL (or a write) removes it. */
const LIVE = "(attribute_not_exists(expiresAtMs) OR expiresAtMs > :now)";
/** A new key's write is tried again this often when another writer creates the same key meanwhile. */
const PUT_ATTEMPTS = 3;

function toStore(item: Item): DataStoreRecord {
  return {
    id: String(item.id),
    workspaceId: String(item.workspaceId),
    name: String(item.name),
    createdAt: Number(item.createdAt),
  };
}

function toEntry(item: Item, keysOnly = false): DataStoreEntry {
  const entry: DataStoreEntry = {
    key: String(item.sk).slice(ENTRY_PREFIX.length),
    value: keysOnly ? "" : String(item.value),
  };
  if (typeof item.expiresAtMs === "number") entry.expiresAt = item.expiresAtMs;
  return entry;
}

const isLive = (item: Item | undefined, now: number): item is Item =>
  item !== undefined && (typeof item.expiresAtMs !== "number" || item.expiresAtMs > now);

/** The expiry attributes of a record: epoch ms (read by Sluice), and epoch seconds for DynamoDB's TTL. */
const expiryAttributes = (expiresAtMs: number) => ({
  expiresAtMs,
  [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil(expiresAtMs / 1000),
});

/**
 * `DataStoreStore` on the DynamoDB resources table (docs/table-design.md "Data stores"). A store is
 * an item `DS#<id>` plus a name guard under its workspace (`WS#<ws>`, `DSNAME#<name>`, a copy of
 * the store, so listing is one Query); its records are one partition `DSREC#<id>`, sort key
 * `K#<key>`. Expired records are filtered out of every read and left to DynamoDB's TTL.
 *
 * The record limit counts with `entries` on the store item, added to in the transaction that
 * writes a new key and taken from when one is deleted. Records removed by TTL and concurrent clears
 * make it drift upwards; a write that finds the store full counts the live records afresh first,
 * so the limit is never reached early. It may be passed by as many records as writers race at it.
 */
export class DynamoDbDataStoreStore implements DataStoreStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async findOrCreateStore(candidate: DataStoreRecord, maxStores: number): Promise<DataStoreRecord> {
    const found = await this.storeByName(candidate.workspaceId, candidate.name);
    if (found) return found;
    const names = collectionQuery(
      this.tableName,
      resourceKeys.dataStoreName(candidate.workspaceId, "").pk,
      SORT_KEY_PREFIX.dataStoreName,
    );
    const count = await countAll(this.client, names);
    if (count >= maxStores) {
      throw conflict(
        `the workspace has ${count} data stores, its limit: delete one before creating "${candidate.name}"`,
      );
    }
    const copy = { ...candidate, type: "dataStore" };
    try {
      await putAllNew(this.client, this.tableName, [
        { ...resourceKeys.dataStore(candidate.id), ...copy, entries: 0 },
        { ...resourceKeys.dataStoreName(candidate.workspaceId, candidate.name), ...copy },
      ]);
      return candidate;
    } catch (error) {
      // Another run created the store of that name meanwhile: that one is the store.
      if (!failedConditionIndexes(error).includes(1)) throw error;
      const winner = await this.storeByName(candidate.workspaceId, candidate.name);
      if (!winner) throw error;
      return winner;
    }
  }

  private async storeByName(workspaceId: string, name: string): Promise<DataStoreRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({
        TableName: this.tableName,
        Key: resourceKeys.dataStoreName(workspaceId, name),
        ConsistentRead: true,
      }),
    );
    return Item && toStore(Item);
  }

  async getStore(id: string): Promise<DataStoreRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.dataStore(id), ConsistentRead: true }),
    );
    return Item && toStore(Item);
  }

  async listStores(workspaceId: string): Promise<DataStoreRecord[]> {
    const names = collectionQuery(
      this.tableName,
      resourceKeys.dataStoreName(workspaceId, "").pk,
      SORT_KEY_PREFIX.dataStoreName,
    );
    return (await queryAll(this.client, names)).map(toStore);
  }

  async deleteStore(id: string): Promise<void> {
    const store = await this.getStore(id);
    if (store) {
      await transactWrite(this.client, [
        transactDelete(this.tableName, resourceKeys.dataStore(id)),
        transactDelete(this.tableName, resourceKeys.dataStoreName(store.workspaceId, store.name)),
      ]);
    }
    // The records go after the store: a write racing the delete finds the store gone (a new key), or
    // leaves a record in a partition no store names any more.
    await deleteAllMatching(this.client, this.tableName, this.keysQuery(id));
  }

  async getEntry(storeId: string, key: string, nowMs: number): Promise<DataStoreEntry | undefined> {
    const item = await this.entryItem(storeId, key);
    return isLive(item, nowMs) ? toEntry(item) : undefined;
  }

  private async entryItem(storeId: string, key: string): Promise<Item | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({
        TableName: this.tableName,
        Key: resourceKeys.dataStoreEntry(storeId, key),
        ConsistentRead: true,
      }),
    );
    return Item;
  }

  async putEntry(
    storeId: string,
    entry: { key: string; value: string; expiry: EntryExpiry },
    nowMs: number,
    maxEntries: number,
  ): Promise<"stored" | "full" | "gone"> {
    const Key = resourceKeys.dataStoreEntry(storeId, entry.key);
    let recounted = false;
    for (let attempt = 1; ; attempt++) {
      if (await this.overwriteLive(Key, entry, nowMs)) return "stored";
      const expiresAt = entry.expiry === "keep" ? null : entry.expiry;
      const item: Item = { ...Key, type: "dataStoreEntry", value: entry.value };
      if (expiresAt !== null) Object.assign(item, expiryAttributes(expiresAt));
      // An expired record of that key: replaced, and still counted (it was when it was new).
      try {
        await this.client.send(
          new PutCommand({ TableName: this.tableName, Item: item, ConditionExpression: "attribute_exists(pk)" }),
        );
        return "stored";
      } catch (error) {
        if (!isConditionalCheckFailed(error)) throw error;
      }
      try {
        await transactWrite(this.client, [
          { Put: { TableName: this.tableName, Item: item, ConditionExpression: "attribute_not_exists(pk)" } },
          {
            Update: {
              TableName: this.tableName,
              Key: resourceKeys.dataStore(storeId),
              UpdateExpression: "ADD entries :one",
              ConditionExpression: "attribute_exists(pk) AND (attribute_not_exists(entries) OR entries < :max)",
              ExpressionAttributeValues: { ":one": 1, ":max": maxEntries },
            },
          },
        ]);
        return "stored";
      } catch (error) {
        const failed = failedConditionIndexes(error);
        if (failed.length === 0) throw error;
        if (failed.includes(1)) {
          if (!(await this.getStore(storeId))) return "gone";
          if (recounted || (await this.recount(storeId, nowMs)) >= maxEntries) return "full";
          recounted = true;
        }
        // Another writer created the key meanwhile: it is now an overwrite.
        if (attempt >= PUT_ATTEMPTS) throw error;
      }
    }
  }

  /** Overwrites a live record of the key; false when there is none. */
  private async overwriteLive(
    Key: { pk: string; sk: string },
    entry: { value: string; expiry: EntryExpiry },
    nowMs: number,
  ): Promise<boolean> {
    const names: Record<string, string> = { "#value": "value" };
    const values: Item = { ":value": entry.value, ":now": nowMs };
    let update = "SET #value = :value";
    if (entry.expiry === null) {
      update += " REMOVE expiresAtMs, #ttl";
      names["#ttl"] = RESOURCES_TABLE.timeToLiveAttribute;
    } else if (entry.expiry !== "keep") {
      update += ", expiresAtMs = :expiresAt, #ttl = :ttl";
      names["#ttl"] = RESOURCES_TABLE.timeToLiveAttribute;
      const attributes = expiryAttributes(entry.expiry);
      values[":expiresAt"] = attributes.expiresAtMs;
      values[":ttl"] = attributes[RESOURCES_TABLE.timeToLiveAttribute];
    }
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key,
          UpdateExpression: update,
          ConditionExpression: `attribute_exists(pk) AND ${LIVE}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
      return true;
    } catch (error) {
      if (isConditionalCheckFailed(error)) return false;
      throw error;
    }
  }

  /** Sets `entries` to the store's live records, counted; returns the count. */
  private async recount(storeId: string, nowMs: number): Promise<number> {
    const count = await this.countEntries(storeId, nowMs);
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: resourceKeys.dataStore(storeId),
          UpdateExpression: "SET entries = :count",
          ConditionExpression: "attribute_exists(pk)",
          ExpressionAttributeValues: { ":count": count },
        }),
      );
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
    }
    return count;
  }

  async setExpiry(storeId: string, key: string, expiresAt: number | null, nowMs: number): Promise<boolean> {
    const names = { "#ttl": RESOURCES_TABLE.timeToLiveAttribute };
    const set =
      expiresAt === null
        ? { UpdateExpression: "REMOVE expiresAtMs, #ttl", ExpressionAttributeValues: { ":now": nowMs } }
        : {
            UpdateExpression: "SET expiresAtMs = :expiresAt, #ttl = :ttl",
            ExpressionAttributeValues: {
              ":now": nowMs,
              ":expiresAt": expiresAt,
              ":ttl": expiryAttributes(expiresAt)[RESOURCES_TABLE.timeToLiveAttribute],
            },
          };
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: resourceKeys.dataStoreEntry(storeId, key),
          ConditionExpression: `attribute_exists(pk) AND ${LIVE}`,
          ExpressionAttributeNames: names,
          ...set,
        }),
      );
      return true;
    } catch (error) {
      if (isConditionalCheckFailed(error)) return false;
      throw error;
    }
  }

  async deleteEntry(storeId: string, key: string, nowMs: number): Promise<boolean> {
    const item = await this.entryItem(storeId, key);
    if (!item) return false;
    try {
      await transactWrite(this.client, [
        transactDelete(this.tableName, resourceKeys.dataStoreEntry(storeId, key), "attribute_exists(pk)"),
        {
          Update: {
            TableName: this.tableName,
            Key: resourceKeys.dataStore(storeId),
            UpdateExpression: "ADD entries :less",
            ConditionExpression: "attribute_exists(pk)",
            ExpressionAttributeValues: { ":less": -1 },
          },
        },
      ]);
    } catch (error) {
      const failed = failedConditionIndexes(error);
      // Deleted meanwhile by another writer: it is gone either way.
      if (failed.includes(0)) return false;
      if (!failed.includes(1)) throw error;
    }
    return isLive(item, nowMs);
  }

  async listEntries(
    storeId: string,
    nowMs: number,
    page: { after?: string; limit: number; maxBytes: number; keysOnly?: boolean },
  ): Promise<EntryPage> {
    const input: QueryCommandInput = {
      TableName: this.tableName,
      KeyConditionExpression: page.after === undefined ? "pk = :pk AND sk >= :from" : "pk = :pk AND sk > :from",
      FilterExpression: LIVE,
      ExpressionAttributeValues: {
        ":pk": resourceKeys.dataStoreEntries(storeId),
        ":from": `${ENTRY_PREFIX}${page.after ?? ""}`,
        ":now": nowMs,
      },
      ConsistentRead: true,
      ...(page.keysOnly === true ? { ProjectionExpression: "sk, expiresAtMs" } : {}),
    };
    const entries: DataStoreEntry[] = [];
    let bytes = 0;
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await this.client.send(
        new QueryCommand({ ...input, Limit: page.limit + 1 - entries.length, ExclusiveStartKey: startKey }),
      );
      for (const item of out.Items ?? []) {
        const entry = toEntry(item, page.keysOnly === true);
        const size = Buffer.byteLength(entry.value);
        if (entries.length === page.limit || (entries.length > 0 && bytes + size > page.maxBytes)) {
          return { entries, nextAfter: (entries.at(-1) as DataStoreEntry).key };
        }
        bytes += size;
        entries.push(entry);
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey);
    return { entries };
  }

  async countEntries(storeId: string, nowMs: number): Promise<number> {
    return countAll(this.client, {
      TableName: this.tableName,
      KeyConditionExpression: "pk = :pk",
      FilterExpression: LIVE,
      ExpressionAttributeValues: { ":pk": resourceKeys.dataStoreEntries(storeId), ":now": nowMs },
      ConsistentRead: true,
    });
  }

  async clearEntries(storeId: string): Promise<void> {
    await deleteAllMatching(this.client, this.tableName, this.keysQuery(storeId), async (deleted) => {
      try {
        await this.client.send(
          new UpdateCommand({
            TableName: this.tableName,
            Key: resourceKeys.dataStore(storeId),
            UpdateExpression: "ADD entries :less",
            ConditionExpression: "attribute_exists(pk)",
            ExpressionAttributeValues: { ":less": -deleted.length },
          }),
        );
      } catch (error) {
        if (!isConditionalCheckFailed(error)) throw error;
      }
    });
  }

  private keysQuery(storeId: string): QueryCommandInput {
    return {
      TableName: this.tableName,
      KeyConditionExpression: "pk = :pk",
      ExpressionAttributeValues: { ":pk": resourceKeys.dataStoreEntries(storeId) },
      ProjectionExpression: "pk, sk",
      ConsistentRead: true,
    };
  }
}
