import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
} from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import type { AppAccountPage, AppAccountRecord, AppAccountStore, PendingConnect } from "#core/ports/app-account-store";
import { failedConditionIndexes, isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, countAll, type Item, putAllNew, queryUpTo } from "./dynamodb-paging.ts";
import { type TransactItem, transactDelete, transactPut, transactWrite } from "./dynamodb-transactions.ts";
import { appAccountExpirySortPrefix, resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

const ACCOUNT_PREFIX = SORT_KEY_PREFIX.appAccount;

/**
 * The attributes of an account. Its token expiry is `tokenExpiresAtMs`: the table's TTL attribute
 * (`expiresAt`) would have DynamoDB delete the account when its access token expires.
 */
function accountAttributes(record: AppAccountRecord): Item {
  const item: Item = {
    type: "appAccount",
    id: record.id,
    workspaceId: record.workspaceId,
    ownerId: record.ownerId,
    app: record.app,
    name: record.name,
    sealedCredentials: record.sealedCredentials,
    healthy: record.healthy,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    version: record.version,
  };
  if (record.expiresAt !== undefined) item.tokenExpiresAtMs = record.expiresAt;
  if (record.lastError !== undefined) item.lastError = record.lastError;
  return item;
}

function toAccount(item: Item): AppAccountRecord {
  const record: AppAccountRecord = {
    id: String(item.id),
    workspaceId: String(item.workspaceId),
    ownerId: String(item.ownerId),
    app: String(item.app),
    name: String(item.name),
    sealedCredentials: String(item.sealedCredentials),
    healthy: item.healthy === true,
    createdAt: Number(item.createdAt),
    updatedAt: Number(item.updatedAt),
    version: Number(item.version),
  };
  if (typeof item.tokenExpiresAtMs === "number") record.expiresAt = item.tokenExpiresAtMs;
  if (typeof item.lastError === "string") record.lastError = item.lastError;
  return record;
}

/** The expiry index's item of `record`: a healthy account whose token expires. */
function expiryItem(
  record: Pick<AppAccountRecord, "id" | "expiresAt" | "healthy">,
): { pk: string; sk: string; type: string; id: string } | undefined {
  if (record.expiresAt === undefined || !record.healthy) return undefined;
  return { ...resourceKeys.appAccountExpiry(record.expiresAt, record.id), type: "appAccountExpiry", id: record.id };
}

function toPending(item: Item): PendingConnect {
  const pending: PendingConnect = {
    state: String(item.state),
    workspaceId: String(item.workspaceId),
    ownerId: String(item.ownerId),
    app: String(item.app),
    sealedVerifier: String(item.sealedVerifier),
    redirectUri: String(item.redirectUri),
    expiresAt: Number(item.expiresAtMs),
  };
  if (typeof item.name === "string") pending.name = item.name;
  return pending;
}

/**
 * `AppAccountStore` on the DynamoDB resources table (docs/table-design.md "Connected accounts"):
 * an account is an item `ACCT#<id>` and a copy under its workspace (`WS#<ws>`, `ACCT#<id>`),
 * written together in transactions, so a workspace's accounts are one Query in id order. An
 * update is conditional on the `version` of the account's item. OAuth authorizations in
 * progress are items `OAUTHSTATE#<state>` that the table's TTL removes after they expire; taking
 * one is a single `DeleteItem` returning the old item, so a state is used once.
 */
export class DynamoDbAppAccountStore implements AppAccountStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async create(record: AppAccountRecord): Promise<void> {
    const attributes = accountAttributes(record);
    const expiry = expiryItem(record);
    await putAllNew(this.client, this.tableName, [
      { ...resourceKeys.appAccount(record.id), ...attributes },
      { ...resourceKeys.appAccountOfWorkspace(record.workspaceId, record.id), ...attributes },
      ...(expiry ? [expiry] : []),
    ]);
  }

  async get(id: string): Promise<AppAccountRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.appAccount(id), ConsistentRead: true }),
    );
    return Item && toAccount(Item);
  }

  private workspaceQuery(workspaceId: string, app: string | undefined) {
    const query = collectionQuery(
      this.tableName,
      resourceKeys.appAccountOfWorkspace(workspaceId, "").pk,
      ACCOUNT_PREFIX,
    );
    if (app === undefined) return query;
    return {
      ...query,
      FilterExpression: "#app = :app",
      ExpressionAttributeNames: { "#app": "app" },
      ExpressionAttributeValues: { ...query.ExpressionAttributeValues, ":app": app },
    };
  }

  async list(workspaceId: string, page: { app?: string; after?: string; limit: number }): Promise<AppAccountPage> {
    const query = this.workspaceQuery(workspaceId, page.app);
    const start =
      page.after === undefined
        ? {}
        : { ExclusiveStartKey: resourceKeys.appAccountOfWorkspace(workspaceId, page.after) };
    // One more than asked: whether another page follows.
    const items = await queryUpTo(this.client, { ...query, ...start }, page.limit + 1);
    const accounts = items.slice(0, page.limit).map(toAccount);
    const last = accounts.at(-1);
    return items.length > page.limit && last ? { accounts, nextAfter: last.id } : { accounts };
  }

  async count(workspaceId: string, app?: string): Promise<number> {
    return countAll(this.client, this.workspaceQuery(workspaceId, app));
  }

  async update(record: AppAccountRecord, expectedVersion: number): Promise<boolean> {
    const attributes = accountAttributes(record);
    // The stored expiry says which index item to move; the version condition below makes sure it
    // is still the one replaced.
    const current = await this.get(record.id);
    if (current?.version !== expectedVersion) return false;
    const before = expiryItem(current);
    const after = expiryItem(record);
    const moves: TransactItem[] = [];
    if (before && before.sk !== after?.sk) moves.push(transactDelete(this.tableName, { pk: before.pk, sk: before.sk }));
    if (after && after.sk !== before?.sk) moves.push(transactPut(this.tableName, after));
    try {
      await transactWrite(this.client, [
        transactPut(this.tableName, { ...resourceKeys.appAccount(record.id), ...attributes }, "version = :expected", {
          ":expected": expectedVersion,
        }),
        transactPut(this.tableName, {
          ...resourceKeys.appAccountOfWorkspace(record.workspaceId, record.id),
          ...attributes,
        }),
        ...moves,
      ]);
      return true;
    } catch (error) {
      // Another version, or no account (the condition fails on a missing item too).
      if (failedConditionIndexes(error).includes(0)) return false;
      throw error;
    }
  }

  async delete(id: string): Promise<boolean> {
    const account = await this.get(id);
    if (!account) return false;
    try {
      const expiry = expiryItem(account);
      await transactWrite(this.client, [
        transactDelete(this.tableName, resourceKeys.appAccount(id), "attribute_exists(pk)"),
        transactDelete(this.tableName, resourceKeys.appAccountOfWorkspace(account.workspaceId, id)),
        ...(expiry ? [transactDelete(this.tableName, { pk: expiry.pk, sk: expiry.sk })] : []),
      ]);
      return true;
    } catch (error) {
      // Deleted by another request meanwhile.
      if (failedConditionIndexes(error).includes(0)) return false;
      throw error;
    }
  }

  async listExpiring(beforeMs: number, limit: number): Promise<AppAccountRecord[]> {
    const { Items = [] } = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: "pk = :pk AND sk < :before",
        ExpressionAttributeValues: {
          ":pk": resourceKeys.appAccountExpiries,
          ":before": appAccountExpirySortPrefix(beforeMs),
        },
        ConsistentRead: true,
        Limit: limit,
      }),
    );
    const accounts = await Promise.all(Items.map((item) => this.get(String(item.id))));
    // Written with the account in one transaction, the index cannot disagree with it; an account
    // changed since this Query read the index is left to the next call.
    return accounts.filter(
      (account): account is AppAccountRecord =>
        account?.healthy === true && account.expiresAt !== undefined && account.expiresAt < beforeMs,
    );
  }

  async savePendingConnect(pending: PendingConnect, _nowMs: number): Promise<void> {
    // Expired ones are left to the table's TTL (epoch seconds), which removes them within days;
    // until then `takePendingConnect` refuses them by `expiresAtMs`.
    const item: Item = {
      ...resourceKeys.pendingConnect(pending.state),
      type: "pendingConnect",
      state: pending.state,
      workspaceId: pending.workspaceId,
      ownerId: pending.ownerId,
      app: pending.app,
      sealedVerifier: pending.sealedVerifier,
      redirectUri: pending.redirectUri,
      expiresAtMs: pending.expiresAt,
      [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil(pending.expiresAt / 1000),
    };
    if (pending.name !== undefined) item.name = pending.name;
    await this.client.send(
      new PutCommand({ TableName: this.tableName, Item: item, ConditionExpression: "attribute_not_exists(pk)" }),
    );
  }

  async takePendingConnect(state: string, nowMs: number): Promise<PendingConnect | undefined> {
    // Conditional on the item being there, so that of two takes at once exactly one deletes it and
    // gets it (an unconditional delete returned the old item to both on DynamoDB Local).
    const deleted = await this.client
      .send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: resourceKeys.pendingConnect(state),
          ConditionExpression: "attribute_exists(pk)",
          ReturnValues: "ALL_OLD",
        }),
      )
      .catch((error: unknown) => {
        if (isConditionalCheckFailed(error)) return { Attributes: undefined };
        throw error;
      });
    const { Attributes } = deleted;
    if (!Attributes) return undefined;
    const pending = toPending(Attributes);
    return pending.expiresAt > nowMs ? pending : undefined;
  }
}
