import { ConditionalCheckFailedException, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import type { SourceRecord } from "#core/component-model";
import { cancelled, failedAt, transactionItems } from "../../support/dynamodb-requests.ts";

const TABLE = "resources-test";
const { put, del } = transactionItems(TABLE);
const ddb = mockClient(DynamoDBDocumentClient);
const store = new DynamoDbSourceStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

const source: SourceRecord = {
  id: "dc_1",
  userId: "u_1",
  workspaceId: "o_1",
  componentId: "sc_1",
  name: "Ticker",
  nameSlug: "ticker",
  configuredProps: { timer: { intervalSeconds: 60 } },
  active: true,
  endpointKey: "ep1",
  timer: { intervalSeconds: 60 },
  createdAt: 10,
  updatedAt: 11,
};
const attributes = (s: SourceRecord) => ({ ...s, configuredProps: JSON.stringify(s.configuredProps) });
const recordItem = (s: SourceRecord, rev: number) => ({
  pk: `SRC#${s.id}`,
  sk: "SRC",
  type: "source",
  rev,
  ...attributes(s),
});
const slugItems = (...slugs: string[]) => slugs.map((slug) => ({ sk: `SLUG#${slug}` }));

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbSourceStore.createSource", () => {
  it("takes the lowest free counter from one consistent Query of the user's slug guards", async () => {
    ddb.on(QueryCommand).resolves({ Items: slugItems("ticker", "ticker-1", "ticker-3", "ticker-extra") });
    const saved = await store.createSource(source);
    expect(saved).toEqual({ ...source, nameSlug: "ticker-2" });
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "USER#u_1", ":prefix": "SLUG#ticker" },
      ProjectionExpression: "sk",
      ConsistentRead: true,
    });
  });

  it("writes the record, slug guard and every copy in one transaction of new items", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    await store.createSource(source);
    const isNew = "attribute_not_exists(pk)";
    expect(ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems).toEqual([
      put(recordItem(source, 1), isNew),
      put({ pk: "USER#u_1", sk: "SLUG#ticker", type: "sourceSlug", sourceId: "dc_1" }, isNew),
      put({ pk: "USER#u_1", sk: "SRC#dc_1", type: "sourceOfUser", ...attributes(source) }, isNew),
      put({ pk: "WS#o_1", sk: "SRC#dc_1", type: "sourceOfWorkspace", ...attributes(source) }, isNew),
      put({ pk: "ENDPOINT#ep1", sk: "ENDPOINT", type: "endpoint", ...attributes(source) }, isNew),
      put({ pk: "TIMERS", sk: "SRC#dc_1", type: "activeTimer", ...attributes(source) }, isNew),
    ]);
  });

  it("writes neither endpoint nor timer copy for an inactive source without endpoint", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    const { endpointKey: _key, ...plain } = source;
    await store.createSource({ ...plain, active: false });
    const types = ddb
      .commandCalls(TransactWriteCommand)[0]
      ?.args[0].input.TransactItems?.map((item) => item.Put?.Item?.type);
    expect(types).toEqual(["source", "sourceSlug", "sourceOfUser", "sourceOfWorkspace"]);
  });

  it("tries the next free slug when another source took the chosen one meanwhile", async () => {
    ddb
      .on(QueryCommand)
      .resolvesOnce({ Items: [] })
      .resolvesOnce({ Items: slugItems("ticker") });
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(1, 6)).resolves({});
    await expect(store.createSource(source)).resolves.toMatchObject({ nameSlug: "ticker-1" });
    const slugs = ddb
      .commandCalls(TransactWriteCommand)
      .map((call) => call.args[0].input.TransactItems?.[1]?.Put?.Item?.sk);
    expect(slugs).toEqual(["SLUG#ticker", "SLUG#ticker-1"]);
  });

  it("goes again when a concurrent transaction held one of its items", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(cancelled(["None", "TransactionConflict", "None", "None", "None", "None"]))
      .resolves({});
    await expect(store.createSource(source)).resolves.toEqual(source);
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(2);
  });

  it("reports a taken endpoint key and an existing id as conflicts", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(4, 6)).rejectsOnce(failedAt(0, 6));
    await expect(store.createSource(source)).rejects.toMatchObject({
      code: "conflict",
      message: "this endpoint key is in use already",
    });
    await expect(store.createSource(source)).rejects.toMatchObject({
      code: "conflict",
      message: "source dc_1 exists already",
    });
  });

  it("refuses a source over the item size limit without writing", async () => {
    const big = { ...source, configuredProps: { blob: "x".repeat(400 * 1024) } };
    await expect(store.createSource(big)).rejects.toMatchObject({ code: "payload_too_large" });
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(0);
  });
});

describe("DynamoDbSourceStore.updateSource", () => {
  const renamed: SourceRecord = { ...source, name: "Other", nameSlug: "other", endpointKey: "ep2", active: false };

  it("conditions the record on its revision, moves slug and endpoint guards and drops the timer copy", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(source, 3) });
    ddb.on(QueryCommand).resolves({ Items: [] });
    await expect(store.updateSource(renamed)).resolves.toEqual(renamed);
    expect(ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems).toEqual([
      put(recordItem(renamed, 4), "rev = :rev", { ":rev": 3 }),
      put({ pk: "USER#u_1", sk: "SLUG#other", type: "sourceSlug", sourceId: "dc_1" }, "attribute_not_exists(pk)"),
      put({ pk: "USER#u_1", sk: "SRC#dc_1", type: "sourceOfUser", ...attributes(renamed) }),
      put({ pk: "WS#o_1", sk: "SRC#dc_1", type: "sourceOfWorkspace", ...attributes(renamed) }),
      put(
        { pk: "ENDPOINT#ep2", sk: "ENDPOINT", type: "endpoint", ...attributes(renamed) },
        "attribute_not_exists(pk) OR id = :id",
        {
          ":id": "dc_1",
        },
      ),
      del({ pk: "USER#u_1", sk: "SLUG#ticker" }),
      del({ pk: "ENDPOINT#ep1", sk: "ENDPOINT" }),
      del({ pk: "TIMERS", sk: "SRC#dc_1" }),
    ]);
  });

  it("neither queries nor moves the slug when it is unchanged", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(source, 1) });
    await store.updateSource({ ...source, name: "Renamed, same slug" });
    expect(ddb.commandCalls(QueryCommand)).toHaveLength(0);
    const items = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(items.map((item) => item.Put?.Item?.sk ?? item.Delete?.Key?.sk)).not.toContain("SLUG#ticker");
    expect(items.filter((item) => item.Delete)).toEqual([]);
  });

  it("answers not_found without writing when the source does not exist", async () => {
    ddb.on(GetCommand).resolves({});
    await expect(store.updateSource(source)).rejects.toMatchObject({ code: "not_found" });
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(0);
  });

  it("reads again and retries when another write changed the record first", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: recordItem(source, 1) })
      .resolves({ Item: recordItem(source, 2) });
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(0, 5)).resolves({});
    await store.updateSource(source);
    const revs = ddb
      .commandCalls(TransactWriteCommand)
      .map((call) => call.args[0].input.TransactItems?.[0]?.Put?.Item?.rev);
    expect(revs).toEqual([2, 3]);
  });

  it("reports another source's endpoint key as a conflict", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(source, 1) });
    ddb.on(TransactWriteCommand).rejects(failedAt(3, 6));
    await expect(store.updateSource({ ...source, endpointKey: "taken" })).rejects.toMatchObject({
      code: "conflict",
      message: "this endpoint key is in use already",
    });
  });
});

describe("DynamoDbSourceStore.deleteSource", () => {
  it("deletes the record (on its revision), slug guard, copies and state in one transaction", async () => {
    ddb.on(GetCommand).resolves({ Item: recordItem(source, 7) });
    await store.deleteSource("dc_1");
    expect(ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems).toEqual([
      del({ pk: "SRC#dc_1", sk: "SRC" }, "rev = :rev", { ":rev": 7 }),
      del({ pk: "USER#u_1", sk: "SLUG#ticker" }),
      del({ pk: "USER#u_1", sk: "SRC#dc_1" }),
      del({ pk: "WS#o_1", sk: "SRC#dc_1" }),
      del({ pk: "ENDPOINT#ep1", sk: "ENDPOINT" }),
      del({ pk: "TIMERS", sk: "SRC#dc_1" }),
      del({ pk: "SRC#dc_1", sk: "STATE" }),
    ]);
  });

  it("reads again and retries when another write changed the record first", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: recordItem(source, 7) })
      .resolves({ Item: recordItem({ ...source, endpointKey: "ep9" }, 8) });
    ddb.on(TransactWriteCommand).rejectsOnce(failedAt(0, 7)).resolves({});
    await store.deleteSource("dc_1");
    const second = ddb.commandCalls(TransactWriteCommand)[1]?.args[0].input.TransactItems;
    expect(second?.[0]).toEqual(del({ pk: "SRC#dc_1", sk: "SRC" }, "rev = :rev", { ":rev": 8 }));
    expect(second).toContainEqual(del({ pk: "ENDPOINT#ep9", sk: "ENDPOINT" }));
  });

  it("only removes a leftover state when the source is already gone", async () => {
    ddb.on(GetCommand).resolves({});
    await store.deleteSource("dc_1");
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(0);
    expect(ddb.commandCalls(DeleteCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "SRC#dc_1", sk: "STATE" },
    });
  });
});

describe("DynamoDbSourceStore reads", () => {
  it("finds a source by endpoint key with one consistent get and returns only the record", async () => {
    ddb
      .on(GetCommand)
      .resolves({ Item: { pk: "ENDPOINT#ep1", sk: "ENDPOINT", type: "endpoint", ...attributes(source) } });
    await expect(store.findSourceByEndpointKey("ep1")).resolves.toStrictEqual(source);
    expect(ddb.commandCalls(GetCommand)).toHaveLength(1);
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "ENDPOINT#ep1", sk: "ENDPOINT" },
      ConsistentRead: true,
    });
  });

  it("pages older sources from the cursor, following LastEvaluatedKey until the page is full, and counts", async () => {
    const copy = (id: string) => ({ pk: "USER#u_1", sk: `SRC#${id}`, ...attributes({ ...source, id }) });
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 42 })
      .on(QueryCommand, { ScanIndexForward: false })
      .resolvesOnce({ Items: [copy("dc_8")], LastEvaluatedKey: { pk: "USER#u_1", sk: "SRC#dc_8" } })
      .resolvesOnce({ Items: [copy("dc_7")], LastEvaluatedKey: { pk: "USER#u_1", sk: "SRC#dc_7" } });

    const page = await store.listSourcesOfUser("u_1", { limit: 2, after: "dc_9" });
    expect(page).toEqual({
      items: [
        { ...source, id: "dc_8" },
        { ...source, id: "dc_7" },
      ],
      totalCount: 42,
    });
    const pages = ddb
      .commandCalls(QueryCommand)
      .map((call) => call.args[0].input)
      .filter((input) => !input.Select);
    const base = {
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "USER#u_1", ":prefix": "SRC#" },
      ConsistentRead: true,
      ScanIndexForward: false,
    };
    expect(pages).toEqual([
      { ...base, Limit: 2, ExclusiveStartKey: { pk: "USER#u_1", sk: "SRC#dc_9" } },
      { ...base, Limit: 1, ExclusiveStartKey: { pk: "USER#u_1", sk: "SRC#dc_8" } },
    ]);
  });

  it("pages newer sources of a workspace ascending from the cursor and returns them newest first", async () => {
    const copy = (id: string) => ({ pk: "WS#o_1", sk: `SRC#${id}`, ...attributes({ ...source, id }) });
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 2 })
      .on(QueryCommand, { ScanIndexForward: true })
      .resolves({ Items: [copy("dc_2"), copy("dc_3")] });
    const page = await store.listSourcesOfWorkspace("o_1", { limit: 2, before: "dc_1" });
    expect(page.items.map((s) => s.id)).toEqual(["dc_3", "dc_2"]);
    const first = ddb.commandCalls(QueryCommand).find((call) => call.args[0].input.ScanIndexForward)?.args[0].input;
    expect(first?.ExclusiveStartKey).toEqual({ pk: "WS#o_1", sk: "SRC#dc_1" });
    expect(first?.ExpressionAttributeValues).toEqual({ ":pk": "WS#o_1", ":prefix": "SRC#" });
  });

  it("lists active timer sources from the TIMERS collection, every page", async () => {
    ddb
      .on(QueryCommand)
      .resolvesOnce({
        Items: [{ pk: "TIMERS", sk: "SRC#dc_1", ...attributes(source) }],
        LastEvaluatedKey: { pk: "TIMERS" },
      })
      .resolvesOnce({ Items: [] });
    await expect(store.listActiveTimerSources()).resolves.toStrictEqual([source]);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "TIMERS", ":prefix": "SRC#" },
      ConsistentRead: true,
    });
    expect(ddb.commandCalls(QueryCommand)).toHaveLength(2);
  });
});

describe("DynamoDbSourceStore state", () => {
  it("creates the first state only if none exists, as version 1", async () => {
    await store.putSourceState("dc_1", { db: { a: 1 }, dedupe: { last: 3 } }, 0);
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Item: { pk: "SRC#dc_1", sk: "STATE", type: "sourceState", db: '{"a":1}', dedupe: '{"last":3}', version: 1 },
      ConditionExpression: "attribute_not_exists(pk)",
    });
  });

  it("replaces a state only while it still has the expected version", async () => {
    await store.putSourceState("dc_1", { db: {}, dedupe: {} }, 4);
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toMatchObject({
      Item: { version: 5 },
      ConditionExpression: "version = :expected",
      ExpressionAttributeValues: { ":expected": 4 },
    });
  });

  it("reports a failed version condition as a conflict", async () => {
    ddb.on(PutCommand).rejects(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }));
    await expect(store.putSourceState("dc_1", { db: {}, dedupe: {} }, 4)).rejects.toMatchObject({ code: "conflict" });
  });

  it("refuses a state over the item size limit without writing", async () => {
    await expect(
      store.putSourceState("dc_1", { db: { big: "x".repeat(360 * 1024) }, dedupe: {} }, 1),
    ).rejects.toMatchObject({
      code: "payload_too_large",
    });
    expect(ddb.commandCalls(PutCommand)).toHaveLength(0);
  });

  it("reads the state consistently and answers version 0 when there is none", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: { db: '{"k":"v"}', dedupe: '{"unique":["1"]}', version: 3 } })
      .resolves({});
    await expect(store.getSourceState("dc_1")).resolves.toEqual({
      db: { k: "v" },
      dedupe: { unique: ["1"] },
      version: 3,
    });
    await expect(store.getSourceState("dc_2")).resolves.toEqual({ db: {}, dedupe: {}, version: 0 });
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "SRC#dc_1", sk: "STATE" },
      ConsistentRead: true,
    });
  });
});
