import { ConditionalCheckFailedException, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DeleteCommand, DynamoDBDocumentClient, PutCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbDeadLetterStore } from "#adapters/aws/dynamodb-dead-letter-store";
import type { DeadLetterRecord } from "#core/subscription-model";

// Reads, pages and deletes run on DynamoDB Local in test/contract/subscription-stores.test.ts;
// these are the answers DynamoDB Local cannot be made to give on demand.
const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
const store = new DynamoDbDeadLetterStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

const deadLetter = (payload: DeadLetterRecord["payload"]): DeadLetterRecord => ({
  id: "dlv_1",
  target: { kind: "webhook", webhookId: "wh_1" },
  subscriptionIds: ["sub_1"],
  emitterId: "dc_1",
  eventId: "1790000000000-0",
  channel: "",
  payload,
  attempts: 8,
  nextAttemptAt: 3,
  createdAt: 1,
  lastError: "HTTP 503",
  userId: "u_1",
  failedAt: 4,
});

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbDeadLetterStore", () => {
  it("puts a dead letter under its webhook's partition with its payload as a JSON string", async () => {
    await store.putDeadLetter(deadLetter({ event: { n: 1 } }));
    expect(ddb.commandCalls(PutCommand)[0]?.args[0].input).toMatchObject({
      TableName: TABLE,
      Item: { pk: "DLQ#wh_1", sk: "DL#dlv_1", type: "deadLetter", payload: '{"event":{"n":1}}' },
    });
  });

  it("refuses a dead letter over the item limit with payload_too_large, without writing", async () => {
    const big = deadLetter({ event: "x".repeat(391 * 1024) });
    await expect(store.putDeadLetter(big)).rejects.toMatchObject({ code: "payload_too_large" });
    expect(ddb.commandCalls(PutCommand)).toHaveLength(0);
    await store.putDeadLetter(deadLetter({ event: "x".repeat(380 * 1024) }));
    expect(ddb.commandCalls(PutCommand)).toHaveLength(1);
  });

  it("answers false to a delete whose item was gone (its condition failed) and lets other errors through", async () => {
    const throttled = Object.assign(new Error("slow down"), { name: "ProvisionedThroughputExceededException" });
    ddb
      .on(DeleteCommand)
      .rejectsOnce(new ConditionalCheckFailedException({ message: "gone", $metadata: {} }))
      .rejectsOnce(throttled)
      .resolves({});
    await expect(store.deleteDeadLetter("wh_1", "dlv_1")).resolves.toBe(false);
    expect(ddb.commandCalls(DeleteCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "DLQ#wh_1", sk: "DL#dlv_1" },
      ConditionExpression: "attribute_exists(pk)",
    });
    await expect(store.deleteDeadLetter("wh_1", "dlv_1")).rejects.toBe(throttled);
    await expect(store.deleteDeadLetter("wh_1", "dlv_1")).resolves.toBe(true);
  });
});
