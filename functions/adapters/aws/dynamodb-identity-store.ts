import {
  BatchGetCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { conflict } from "#core/errors";
import type { ApiKeyRecord, Membership, NewAccount, Project, User, Workspace } from "#core/identity";
import type { IdentityStore } from "#core/ports/identity-store";
import { failedConditionIndexes, isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, type Item, putAllNew, queryAll, sendUntilProcessed } from "./dynamodb-paging.ts";
import type { Key } from "./dynamodb-transactions.ts";
import { resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

/** Every attribute of an entity: a mapper built from it can neither miss one nor leak pk/sk/type. */
type Fields<T> = Record<keyof T, true>;
const USER: Fields<User> = { id: true, username: true, email: true, createdAt: true, updatedAt: true };
const WORKSPACE: Fields<Workspace> = {
  id: true,
  number: true,
  orgname: true,
  name: true,
  email: true,
  createdAt: true,
  updatedAt: true,
};
const MEMBERSHIP: Fields<Membership> = { workspaceId: true, userId: true, role: true, createdAt: true };
const PROJECT: Fields<Project> = { id: true, workspaceId: true, name: true, createdAt: true, updatedAt: true };
const API_KEY: Fields<ApiKeyRecord> = { id: true, hash: true, userId: true, label: true, createdAt: true };

function pick<T>(source: object, fields: Fields<T>): T {
  const values = source as Item;
  return Object.fromEntries(Object.keys(fields).map((name) => [name, values[name]])) as T;
}
const toItem = <T>(key: Key, type: string, entity: T, fields: Fields<T>): Item => ({
  ...key,
  type,
  ...pick(entity as object, fields),
});
const fromItem = <T>(item: Item | undefined, fields: Fields<T>): T | undefined => item && pick(item, fields);

/** BatchGetItem reads at most 100 keys per request. */
const BATCH_GET_LIMIT = 100;
const BATCH_GET_ATTEMPTS = 6;

/**
 * `IdentityStore` on the DynamoDB resources table; docs/table-design.md describes the items and
 * why each access pattern is served the way it is.
 */
export class DynamoDbIdentityStore implements IdentityStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async createAccount(account: NewAccount): Promise<{ workspace: Workspace }> {
    // The counter cannot be read back inside a transaction, so the number is taken first. A
    // cancelled transaction therefore leaves a gap: numbers are unique and increasing, not dense.
    const counter = await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: resourceKeys.workspaceCounter(),
        UpdateExpression: "SET #type = :type ADD lastNumber :one",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: { ":type": "counter", ":one": 1 },
        ReturnValues: "UPDATED_NEW",
      }),
    );
    const workspace: Workspace = { ...account.workspace, number: Number(counter.Attributes?.lastNumber) };
    const { user, membership, project, apiKey } = account;
    const usernameGuard = { ...resourceKeys.username(user.username), type: "username", userId: user.id };
    const apiKeyItem = toItem(resourceKeys.apiKey(apiKey.hash), "apiKey", apiKey, API_KEY);
    const items = [
      toItem(resourceKeys.user(user.id), "user", user, USER),
      usernameGuard,
      toItem(resourceKeys.workspace(workspace.id), "workspace", workspace, WORKSPACE),
      toItem(resourceKeys.member(workspace.id, user.id), "member", membership, MEMBERSHIP),
      toItem(resourceKeys.membershipOfUser(user.id, workspace.id), "membershipOfUser", membership, MEMBERSHIP),
      toItem(resourceKeys.project(project.workspaceId, project.id), "project", project, PROJECT),
      apiKeyItem,
    ];
    try {
      await putAllNew(this.client, this.tableName, items);
    } catch (error) {
      const failed = failedConditionIndexes(error);
      if (failed.includes(items.indexOf(usernameGuard))) throw conflict(`username ${user.username} is taken`);
      if (failed.includes(items.indexOf(apiKeyItem))) throw conflict("this API key exists already");
      throw error;
    }
    return { workspace };
  }

  async addApiKey(key: ApiKeyRecord): Promise<void> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: toItem(resourceKeys.apiKey(key.hash), "apiKey", key, API_KEY),
          ConditionExpression: "attribute_not_exists(pk)",
        }),
      );
    } catch (error) {
      if (isConditionalCheckFailed(error)) throw conflict("this API key exists already");
      throw error;
    }
  }

  // Eventually consistent: this is the read of every authenticated request, and a key is used
  // well after it was created, so half-price reads win over read-after-write here.
  async findApiKeyByHash(hash: string) {
    return fromItem(await this.get(resourceKeys.apiKey(hash), false), API_KEY);
  }

  async getUser(userId: string) {
    return fromItem(await this.get(resourceKeys.user(userId)), USER);
  }

  async findUserByUsername(username: string) {
    const guard = await this.get(resourceKeys.username(username));
    return typeof guard?.userId === "string" ? this.getUser(guard.userId) : undefined;
  }

  async getWorkspace(workspaceId: string) {
    return fromItem(await this.get(resourceKeys.workspace(workspaceId)), WORKSPACE);
  }

  async getMembership(workspaceId: string, userId: string) {
    return fromItem(await this.get(resourceKeys.member(workspaceId, userId)), MEMBERSHIP);
  }

  async listWorkspacesOfUser(userId: string) {
    const memberships = await this.queryCollection(resourceKeys.user(userId).pk, SORT_KEY_PREFIX.membershipOfUser);
    const keys = memberships.map((item) => resourceKeys.workspace(String(item.workspaceId)));
    const workspaces = (await this.batchGet(keys)).map((item) => pick(item, WORKSPACE));
    // BatchGetItem returns items in no particular order; ids sort by creation time.
    return workspaces.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async listProjects(workspaceId: string) {
    const items = await this.queryCollection(resourceKeys.workspace(workspaceId).pk, SORT_KEY_PREFIX.project);
    return items.map((item) => pick(item, PROJECT));
  }

  private async get(key: Key, consistent = true): Promise<Item | undefined> {
    const out = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: key, ConsistentRead: consistent }),
    );
    return out.Item;
  }

  /** Every item of a collection under a sort-key prefix, ascending (= creation order). */
  private queryCollection(pk: string, skPrefix: string): Promise<Item[]> {
    return queryAll(this.client, { ...collectionQuery(this.tableName, pk, skPrefix), ScanIndexForward: true });
  }

  private async batchGet(keys: Key[]): Promise<Item[]> {
    const items: Item[] = [];
    for (let start = 0; start < keys.length; start += BATCH_GET_LIMIT) {
      const batch = keys.slice(start, start + BATCH_GET_LIMIT);
      await sendUntilProcessed("BatchGetItem", batch, BATCH_GET_ATTEMPTS, async (Keys) => {
        const out = await this.client.send(
          new BatchGetCommand({ RequestItems: { [this.tableName]: { Keys, ConsistentRead: true } } }),
        );
        items.push(...(out.Responses?.[this.tableName] ?? []));
        return (out.UnprocessedKeys?.[this.tableName]?.Keys ?? []) as Key[];
      });
    }
    return items;
  }
}
