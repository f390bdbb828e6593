import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from "@aws-sdk/client-dynamodb";
import {
  BatchGetCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import type { NewAccount, Workspace } from "#core/identity";

const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
// The production client (same marshalling options); the mock intercepts every document client.
const store = new DynamoDbIdentityStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

const account: NewAccount = {
  user: { id: "u_1", username: "ada", email: "ada@example.com", createdAt: 10, updatedAt: 11 },
  workspace: { id: "o_1", orgname: "ada", name: "Ada's", email: "ada@example.com", createdAt: 10, updatedAt: 11 },
  membership: { workspaceId: "o_1", userId: "u_1", role: "owner", createdAt: 10 },
  project: { id: "proj_1", workspaceId: "o_1", name: "Default", createdAt: 10, updatedAt: 11 },
  apiKey: { id: "key_1", hash: "ab12", userId: "u_1", label: "initial", createdAt: 10 },
};
const workspace = (id: string, number: number): Workspace => ({ ...account.workspace, id, number });
const workspaceItem = (w: Workspace) => ({ pk: `WS#${w.id}`, sk: "WS", type: "workspace", ...w });

/** A cancelled transaction as DynamoDB reports it: one reason per item, in request order. */
function cancelled(codes: string[]) {
  return new TransactionCanceledException({
    message: "Transaction cancelled, please refer cancellation reasons for specific reasons",
    $metadata: {},
    CancellationReasons: codes.map((Code) => ({ Code })),
  });
}
const conditionFailedAt = (index: number) =>
  cancelled(Array.from({ length: 7 }, (_, i) => (i === index ? "ConditionalCheckFailed" : "None")));

beforeEach(() => {
  ddb.reset();
  ddb.on(UpdateCommand).resolves({ Attributes: { lastNumber: 42 } });
});

describe("DynamoDbIdentityStore.createAccount", () => {
  it("takes the workspace number from an atomic ADD on the counter item", async () => {
    await store.createAccount(account);
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "COUNTER", sk: "WORKSPACE_NUMBER" },
      UpdateExpression: "SET #type = :type ADD lastNumber :one",
      ExpressionAttributeNames: { "#type": "type" },
      ExpressionAttributeValues: { ":type": "counter", ":one": 1 },
      ReturnValues: "UPDATED_NEW",
    });
  });

  it("writes every item of the account in one transaction of puts that each require a new key", async () => {
    await store.createAccount(account);
    const calls = ddb.commandCalls(TransactWriteCommand);
    expect(calls).toHaveLength(1);
    const put = (Item: Record<string, unknown>) => ({
      Put: { TableName: TABLE, Item, ConditionExpression: "attribute_not_exists(pk)" },
    });
    expect(calls[0]?.args[0].input.TransactItems).toEqual([
      put({ pk: "USER#u_1", sk: "USER", type: "user", ...account.user }),
      put({ pk: "USERNAME#ada", sk: "USERNAME", type: "username", userId: "u_1" }),
      put({ pk: "WS#o_1", sk: "WS", type: "workspace", ...account.workspace, number: 42 }),
      put({ pk: "WS#o_1", sk: "MEMBER#u_1", type: "member", ...account.membership }),
      put({ pk: "USER#u_1", sk: "WS#o_1", type: "membershipOfUser", ...account.membership }),
      put({ pk: "WS#o_1", sk: "PROJ#proj_1", type: "project", ...account.project }),
      put({ pk: "APIKEY#ab12", sk: "APIKEY", type: "apiKey", ...account.apiKey }),
    ]);
  });

  it("returns the workspace with the number the counter handed out", async () => {
    await expect(store.createAccount(account)).resolves.toEqual({ workspace: workspace("o_1", 42) });
  });

  it("reports a taken username as a conflict when the username guard's condition fails", async () => {
    ddb.on(TransactWriteCommand).rejects(conditionFailedAt(1));
    await expect(store.createAccount(account)).rejects.toMatchObject({
      name: "DomainError",
      code: "conflict",
      message: "username ada is taken",
    });
  });

  it("reports an existing API key as a conflict about the key when the key item's condition fails", async () => {
    ddb.on(TransactWriteCommand).rejects(conditionFailedAt(6));
    await expect(store.createAccount(account)).rejects.toMatchObject({
      code: "conflict",
      message: "this API key exists already",
    });
  });

  it("lets a transaction cancelled for another reason propagate unchanged", async () => {
    const error = cancelled(["TransactionConflict", "None", "None", "None", "None", "None", "None"]);
    ddb.on(TransactWriteCommand).rejects(error);
    await expect(store.createAccount(account)).rejects.toBe(error);
  });

  it("lets an unrelated SDK error propagate unchanged", async () => {
    const error = new ProvisionedThroughputExceededException({ message: "slow down", $metadata: {} });
    ddb.on(TransactWriteCommand).rejects(error);
    await expect(store.createAccount(account)).rejects.toBe(error);
  });
});

describe("DynamoDbIdentityStore.addApiKey", () => {
  const key = { ...account.apiKey, id: "key_2", hash: "cd34", label: "ci" };

  it("puts the key item under its hash only if no item has that key", async () => {
    await store.addApiKey(key);
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Item: { pk: "APIKEY#cd34", sk: "APIKEY", type: "apiKey", ...key },
      ConditionExpression: "attribute_not_exists(pk)",
    });
  });

  it("reports a failed condition as a conflict about the key", async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }));
    await expect(store.addApiKey(key)).rejects.toMatchObject({
      code: "conflict",
      message: "this API key exists already",
    });
  });

  it("lets any other error propagate unchanged", async () => {
    const error = new Error("network down");
    ddb.on(PutCommand).rejects(error);
    await expect(store.addApiKey(key)).rejects.toBe(error);
  });
});

describe("DynamoDbIdentityStore reads by key", () => {
  it("finds an API key by hash with an eventually consistent get and returns only the record", async () => {
    ddb.on(GetCommand).resolves({ Item: { pk: "APIKEY#ab12", sk: "APIKEY", type: "apiKey", ...account.apiKey } });
    await expect(store.findApiKeyByHash("ab12")).resolves.toStrictEqual(account.apiKey);
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "APIKEY#ab12", sk: "APIKEY" },
      ConsistentRead: false,
    });
  });

  it("reads a user, a workspace and a membership with consistent gets on their keys", async () => {
    ddb
      .on(GetCommand, { Key: { pk: "USER#u_1", sk: "USER" } })
      .resolves({ Item: { pk: "USER#u_1", sk: "USER", type: "user", ...account.user } })
      .on(GetCommand, { Key: { pk: "WS#o_1", sk: "WS" } })
      .resolves({ Item: workspaceItem(workspace("o_1", 7)) })
      .on(GetCommand, { Key: { pk: "WS#o_1", sk: "MEMBER#u_1" } })
      .resolves({ Item: { pk: "WS#o_1", sk: "MEMBER#u_1", type: "member", ...account.membership } });

    await expect(store.getUser("u_1")).resolves.toStrictEqual(account.user);
    await expect(store.getWorkspace("o_1")).resolves.toStrictEqual(workspace("o_1", 7));
    await expect(store.getMembership("o_1", "u_1")).resolves.toStrictEqual(account.membership);
    expect(ddb.commandCalls(GetCommand).map((call) => call.args[0].input)).toEqual(
      [
        { pk: "USER#u_1", sk: "USER" },
        { pk: "WS#o_1", sk: "WS" },
        { pk: "WS#o_1", sk: "MEMBER#u_1" },
      ].map((Key) => ({ TableName: TABLE, Key, ConsistentRead: true })),
    );
  });

  it("answers undefined when the item does not exist", async () => {
    ddb.on(GetCommand).resolves({});
    await expect(store.getUser("u_9")).resolves.toBeUndefined();
    await expect(store.getWorkspace("o_9")).resolves.toBeUndefined();
    await expect(store.getMembership("o_9", "u_9")).resolves.toBeUndefined();
    await expect(store.findApiKeyByHash("ffff")).resolves.toBeUndefined();
  });

  it("finds a user by username through the guard item, then the user item", async () => {
    ddb
      .on(GetCommand, { Key: { pk: "USERNAME#ada", sk: "USERNAME" } })
      .resolves({ Item: { pk: "USERNAME#ada", sk: "USERNAME", type: "username", userId: "u_1" } })
      .on(GetCommand, { Key: { pk: "USER#u_1", sk: "USER" } })
      .resolves({ Item: { pk: "USER#u_1", sk: "USER", type: "user", ...account.user } });
    await expect(store.findUserByUsername("ada")).resolves.toStrictEqual(account.user);
    expect(ddb.commandCalls(GetCommand).map((call) => call.args[0].input.Key)).toEqual([
      { pk: "USERNAME#ada", sk: "USERNAME" },
      { pk: "USER#u_1", sk: "USER" },
    ]);
  });

  it("answers undefined for an unknown username without reading any user", async () => {
    ddb.on(GetCommand).resolves({});
    await expect(store.findUserByUsername("nobody")).resolves.toBeUndefined();
    expect(ddb.commandCalls(GetCommand)).toHaveLength(1);
  });
});

describe("DynamoDbIdentityStore.listWorkspacesOfUser", () => {
  const membershipItems = (ids: string[]) =>
    ids.map((id) => ({ pk: "USER#u_1", sk: `WS#${id}`, type: "membershipOfUser", workspaceId: id, userId: "u_1" }));

  afterEach(() => {
    vi.useRealTimers();
  });

  it("queries the user's membership items ascending and follows LastEvaluatedKey to the last page", async () => {
    ddb
      .on(QueryCommand)
      .resolvesOnce({ Items: membershipItems(["o_1"]), LastEvaluatedKey: { pk: "USER#u_1", sk: "WS#o_1" } })
      .resolvesOnce({ Items: membershipItems(["o_2"]) });
    ddb.on(BatchGetCommand).resolves({ Responses: { [TABLE]: [workspaceItem(workspace("o_1", 1))] } });

    await store.listWorkspacesOfUser("u_1");
    const query = {
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "USER#u_1", ":prefix": "WS#" },
      ScanIndexForward: true,
      ConsistentRead: true,
    };
    expect(ddb.commandCalls(QueryCommand).map((call) => call.args[0].input)).toEqual([
      { ...query, ExclusiveStartKey: undefined },
      { ...query, ExclusiveStartKey: { pk: "USER#u_1", sk: "WS#o_1" } },
    ]);
    expect(ddb.commandCalls(BatchGetCommand)[0]?.args[0].input).toEqual({
      RequestItems: {
        [TABLE]: {
          Keys: [
            { pk: "WS#o_1", sk: "WS" },
            { pk: "WS#o_2", sk: "WS" },
          ],
          ConsistentRead: true,
        },
      },
    });
  });

  it("reads the workspaces in BatchGet requests of at most 100 keys", async () => {
    const ids = Array.from({ length: 230 }, (_, i) => `o_${String(i).padStart(3, "0")}`);
    ddb.on(QueryCommand).resolves({ Items: membershipItems(ids) });
    ddb.on(BatchGetCommand).resolves({ Responses: { [TABLE]: [] } });

    await store.listWorkspacesOfUser("u_1");
    const batches = ddb.commandCalls(BatchGetCommand).map((call) => call.args[0].input.RequestItems?.[TABLE]?.Keys);
    expect(batches.map((keys) => keys?.length)).toEqual([100, 100, 30]);
    expect(batches.flat()).toEqual(ids.map((id) => ({ pk: `WS#${id}`, sk: "WS" })));
  });

  it("asks again for the UnprocessedKeys until every workspace is read", async () => {
    ddb.on(QueryCommand).resolves({ Items: membershipItems(["o_1", "o_2"]) });
    const pending = { [TABLE]: { Keys: [{ pk: "WS#o_2", sk: "WS" }] } };
    ddb
      .on(BatchGetCommand)
      .resolvesOnce({ Responses: { [TABLE]: [workspaceItem(workspace("o_1", 1))] }, UnprocessedKeys: pending })
      .resolvesOnce({ Responses: { [TABLE]: [workspaceItem(workspace("o_2", 2))] }, UnprocessedKeys: {} });

    await expect(store.listWorkspacesOfUser("u_1")).resolves.toEqual([workspace("o_1", 1), workspace("o_2", 2)]);
    const requests = ddb.commandCalls(BatchGetCommand).map((call) => call.args[0].input.RequestItems?.[TABLE]?.Keys);
    expect(requests).toEqual([
      [
        { pk: "WS#o_1", sk: "WS" },
        { pk: "WS#o_2", sk: "WS" },
      ],
      [{ pk: "WS#o_2", sk: "WS" }],
    ]);
  });

  it("fails instead of retrying forever when keys stay unprocessed", async () => {
    vi.useFakeTimers();
    ddb.on(QueryCommand).resolves({ Items: membershipItems(["o_1"]) });
    ddb.on(BatchGetCommand).resolves({ UnprocessedKeys: { [TABLE]: { Keys: [{ pk: "WS#o_1", sk: "WS" }] } } });

    const result = store.listWorkspacesOfUser("u_1");
    const assertion = expect(result).rejects.toThrow(/unprocessed/);
    await vi.runAllTimersAsync();
    await assertion;
    expect(ddb.commandCalls(BatchGetCommand).length).toBeGreaterThan(1);
  });

  it("returns the workspaces oldest first, whatever order BatchGet answers in, without key attributes", async () => {
    ddb.on(QueryCommand).resolves({ Items: membershipItems(["o_1", "o_2", "o_3"]) });
    const answered = [workspace("o_3", 3), workspace("o_1", 1), workspace("o_2", 2)];
    ddb.on(BatchGetCommand).resolves({ Responses: { [TABLE]: answered.map(workspaceItem) } });

    const listed = await store.listWorkspacesOfUser("u_1");
    expect(listed).toStrictEqual([workspace("o_1", 1), workspace("o_2", 2), workspace("o_3", 3)]);
  });

  it("sends no BatchGet when the user belongs to no workspace", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    await expect(store.listWorkspacesOfUser("u_1")).resolves.toEqual([]);
    expect(ddb.commandCalls(BatchGetCommand)).toHaveLength(0);
  });
});

describe("DynamoDbIdentityStore.listProjects", () => {
  it("queries the workspace's project items ascending across every page and returns them as projects", async () => {
    const second = { ...account.project, id: "proj_2", name: "Second" };
    const projectItem = (p: typeof second) => ({ pk: "WS#o_1", sk: `PROJ#${p.id}`, type: "project", ...p });
    ddb
      .on(QueryCommand)
      .resolvesOnce({ Items: [projectItem(account.project)], LastEvaluatedKey: { pk: "WS#o_1", sk: "PROJ#proj_1" } })
      .resolvesOnce({ Items: [projectItem(second)] });

    await expect(store.listProjects("o_1")).resolves.toStrictEqual([account.project, second]);
    const inputs = ddb.commandCalls(QueryCommand).map((call) => call.args[0].input);
    expect(inputs[0]).toEqual({
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "WS#o_1", ":prefix": "PROJ#" },
      ScanIndexForward: true,
      ConsistentRead: true,
    });
    expect(inputs[1]?.ExclusiveStartKey).toEqual({ pk: "WS#o_1", sk: "PROJ#proj_1" });
  });
});
