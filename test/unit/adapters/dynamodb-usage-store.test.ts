import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbUsageStore } from "#adapters/aws/dynamodb-usage-store";

const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
// The production client (same marshalling options); the mock intercepts every document client.
const store = new DynamoDbUsageStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbUsageStore.addUsage", () => {
  it("adds all three counters with one ADD update on the owner's item of that day", async () => {
    await store.addUsage("u_1", "2026-11-20", { invocations: 2, computeTimeMs: 150, credits: 3 });
    const calls = ddb.commandCalls(UpdateCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "USAGE#u_1", sk: "DAY#2026-11-20" },
      UpdateExpression: "SET #type = :type ADD invocations :i, computeTimeMs :c, credits :r",
      ExpressionAttributeNames: { "#type": "type" },
      ExpressionAttributeValues: { ":type": "usage", ":i": 2, ":c": 150, ":r": 3 },
    });
  });

  it("adds 0 for the counters a delta leaves out", async () => {
    await store.addUsage("o_1", "2026-11-21", { computeTimeMs: 9 });
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input.ExpressionAttributeValues).toEqual({
      ":type": "usage",
      ":i": 0,
      ":c": 9,
      ":r": 0,
    });
  });
});

describe("DynamoDbUsageStore.getUsage", () => {
  it("reads the owner's item of that day with a consistent get and returns its counters", async () => {
    ddb.on(GetCommand).resolves({
      Item: { pk: "USAGE#u_1", sk: "DAY#2026-11-20", type: "usage", invocations: 3, computeTimeMs: 150, credits: 3 },
    });
    await expect(store.getUsage("u_1", "2026-11-20")).resolves.toStrictEqual({
      invocations: 3,
      computeTimeMs: 150,
      credits: 3,
    });
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "USAGE#u_1", sk: "DAY#2026-11-20" },
      ConsistentRead: true,
    });
  });

  it("reports zeros when nothing was counted for that day", async () => {
    ddb.on(GetCommand).resolves({});
    await expect(store.getUsage("u_1", "2026-11-20")).resolves.toEqual({
      invocations: 0,
      computeTimeMs: 0,
      credits: 0,
    });
  });

  it("reports zero for a counter the item does not hold", async () => {
    ddb.on(GetCommand).resolves({ Item: { pk: "USAGE#u_1", sk: "DAY#2026-11-20", invocations: 4 } });
    await expect(store.getUsage("u_1", "2026-11-20")).resolves.toEqual({
      invocations: 4,
      computeTimeMs: 0,
      credits: 0,
    });
  });
});

describe("DynamoDbUsageStore stored totals and windows", () => {
  const DAY = 86_400_000;
  const now = Date.UTC(2026, 10, 20, 15);
  const retained = new DynamoDbUsageStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE, {
    eventMaxAgeMs: 30 * DAY,
    clock: { nowMs: () => now },
  });

  it("adds to the day's bucket, which expires with its events, and records the source's owner once", async () => {
    ddb.on(UpdateCommand).resolves({});
    ddb.on(PutCommand).resolves({});
    await retained.addStored("o_1", "dc_once", now, { events: 2, bytes: 40 });
    await retained.addStored("o_1", "dc_once", now, { events: 1, bytes: 10 });
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "USAGE#o_1", sk: "STORED#2026-11-20" },
      UpdateExpression: "SET #type = :type, #ttl = if_not_exists(#ttl, :expiry) ADD events :e, bytes :b",
      ExpressionAttributeNames: { "#type": "type", "#ttl": "expiresAt" },
      // The end of the day plus 30 days, in epoch seconds.
      ExpressionAttributeValues: {
        ":type": "storedUsage",
        ":e": 2,
        ":b": 40,
        ":expiry": (Date.UTC(2026, 10, 21) + 30 * DAY) / 1000,
      },
    });
    expect(ddb.commandCalls(PutCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: TABLE,
        Item: { pk: "STOREDSRC#dc_once", sk: "OWNER", type: "storedOwner", ownerId: "o_1" },
        ConditionExpression: "attribute_not_exists(pk)",
      },
    ]);
  });

  it("sums the buckets of the days the retention keeps, read consistently", async () => {
    ddb.on(QueryCommand).resolves({
      Items: [
        { events: 3, bytes: 30 },
        { events: -1, bytes: -10 },
      ],
    });
    await expect(retained.getStored("o_1")).resolves.toEqual({ events: 2, bytes: 20 });
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      KeyConditionExpression: "pk = :pk AND sk BETWEEN :first AND :last",
      ExpressionAttributeValues: { ":pk": "USAGE#o_1", ":first": "STORED#2026-10-21", ":last": "STORED#\uffff" },
      ConsistentRead: true,
    });
  });

  it("counts in a window with one ADD that returns the new count, expiring after the window", async () => {
    ddb.on(UpdateCommand).resolves({ Attributes: { count: 3 } });
    await expect(store.countInWindow("runs:o_1", 60_000, 60_000)).resolves.toBe(3);
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input).toMatchObject({
      Key: { pk: "WINDOW#runs:o_1", sk: "AT#60000" },
      UpdateExpression: "SET #type = :type, #ttl = :expiry ADD #count :one",
      ReturnValues: "UPDATED_NEW",
    });
  });
});
