import { randomBytes } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { DynamoDBClient, TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand, QueryCommand, TransactWriteCommand } from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbComponentStore } from "#adapters/aws/dynamodb-component-store";
import type { ComponentRecord } from "#core/component-model";

const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
const store = new DynamoDbComponentStore(documentClient(new DynamoDBClient({ region: "local" })), TABLE);

const component: ComponentRecord = {
  id: "sc_1",
  ownerId: "u_1",
  key: "tick",
  name: "Tick",
  version: "0.0.1",
  code: "export default { name: 'Tick', async run() {} };",
  codeHash: "abc123",
  componentUrl: "https://example.com/tick.mjs",
  metadata: { type: "source", hooks: [], methods: [], hasRun: true, hasAdditionalProps: false, props: [] },
  createdAt: 10,
  updatedAt: 11,
};
const storedItem = (c: ComponentRecord) => {
  const { code, metadata, ...rest } = c;
  return {
    pk: `COMP#${c.id}`,
    sk: "COMP",
    type: "component",
    ...rest,
    codeGzip: new Uint8Array(gzipSync(code)),
    metadata: JSON.stringify(metadata),
  };
};

function cancelled(codes: string[]) {
  return new TransactionCanceledException({
    message: "Transaction cancelled",
    $metadata: {},
    CancellationReasons: codes.map((Code) => ({ Code })),
  });
}

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbComponentStore.putComponent", () => {
  it("puts the component with gzipped code and its key pointer in one transaction of new items", async () => {
    await store.putComponent(component);
    const calls = ddb.commandCalls(TransactWriteCommand);
    expect(calls).toHaveLength(1);
    const [record, pointer] = calls[0]?.args[0].input.TransactItems ?? [];
    const { code: _code, metadata: _metadata, ...plain } = component;
    expect(record?.Put).toMatchObject({
      TableName: TABLE,
      ConditionExpression: "attribute_not_exists(pk)",
      Item: { pk: "COMP#sc_1", sk: "COMP", type: "component", ...plain, metadata: JSON.stringify(component.metadata) },
    });
    expect(record?.Put?.Item).not.toHaveProperty("code");
    expect(gunzipSync(record?.Put?.Item?.codeGzip as Uint8Array).toString("utf8")).toBe(component.code);
    expect(pointer).toEqual({
      Put: {
        TableName: TABLE,
        Item: { pk: "COMPKEY#u_1#tick", sk: "COMP#sc_1", type: "componentByKey", componentId: "sc_1" },
        ConditionExpression: "attribute_not_exists(pk)",
      },
    });
  });

  it("writes no pointer and no empty attributes for a component without key or URL", async () => {
    const { key: _key, componentUrl: _url, ...bare } = component;
    await store.putComponent(bare);
    const items = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(items).toHaveLength(1);
    expect(Object.keys(items[0]?.Put?.Item ?? {})).not.toContain("key");
    expect(Object.keys(items[0]?.Put?.Item ?? {})).not.toContain("componentUrl");
  });

  it("reports a failed condition as a conflict about the id", async () => {
    ddb.on(TransactWriteCommand).rejects(cancelled(["ConditionalCheckFailed", "None"]));
    await expect(store.putComponent(component)).rejects.toMatchObject({
      code: "conflict",
      message: "component sc_1 exists already",
    });
  });

  it("lets a transaction cancelled for another reason propagate unchanged", async () => {
    const error = cancelled(["TransactionConflict", "None"]);
    ddb.on(TransactWriteCommand).rejects(error);
    await expect(store.putComponent(component)).rejects.toBe(error);
  });

  it("refuses code that stays over the item limit once compressed, without writing", async () => {
    const code = randomBytes(600 * 1024).toString("base64");
    await expect(store.putComponent({ ...component, code })).rejects.toMatchObject({ code: "payload_too_large" });
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(0);
  });
});

describe("DynamoDbComponentStore reads", () => {
  it("gets a component with a consistent read and returns it with its code decompressed", async () => {
    ddb.on(GetCommand).resolves({ Item: storedItem(component) });
    await expect(store.getComponent("sc_1")).resolves.toStrictEqual(component);
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: { pk: "COMP#sc_1", sk: "COMP" },
      ConsistentRead: true,
    });
  });

  it("finds the newest by key from the last pointer of the key's collection, then gets that component", async () => {
    ddb.on(QueryCommand).resolves({ Items: [{ pk: "COMPKEY#u_1#tick", sk: "COMP#sc_1", componentId: "sc_1" }] });
    ddb.on(GetCommand).resolves({ Item: storedItem(component) });
    await expect(store.findComponentByKey("u_1", "tick")).resolves.toStrictEqual(component);
    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "COMPKEY#u_1#tick", ":prefix": "COMP#" },
      ScanIndexForward: false,
      Limit: 1,
      ConsistentRead: true,
    });
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input.Key).toEqual({ pk: "COMP#sc_1", sk: "COMP" });
  });

  it("answers undefined for an unknown key without reading any component", async () => {
    ddb.on(QueryCommand).resolves({ Items: [] });
    await expect(store.findComponentByKey("u_1", "nope")).resolves.toBeUndefined();
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });
});
