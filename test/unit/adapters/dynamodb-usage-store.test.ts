import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/composition";
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
