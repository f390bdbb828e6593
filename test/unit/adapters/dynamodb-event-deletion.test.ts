import { ConditionalCheckFailedException, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  BatchWriteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/composition";
import { DynamoDbEventStore, visibleSegments } from "#adapters/aws/dynamodb-event-store";
import { DEFAULT_EVENT_RETENTION } from "#ports/event-store";

const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
const client = documentClient(new DynamoDBClient({ region: "local" }));
/** Default retention (30 days). */
const store = new DynamoDbEventStore(client, TABLE);
const keepForever = new DynamoDbEventStore(client, TABLE, { retention: { maxAgeMs: 0, keepPerChannel: 0 } });

const SEQUENCE_KEY = { pk: "EVTSEQ#dc_1", sk: "EVTSEQ" };
const sequenceItem = (lastMs: number, lastN: number, channels = ["ch:"], tombstones: string[] = []) => ({
  ...SEQUENCE_KEY,
  type: "eventSequence",
  lastMs,
  lastN,
  channels: new Set(channels),
  ...(tombstones.length > 0 ? { tombstones: new Set(tombstones) } : {}),
});
const padded = (id: string) => {
  const [ms, n] = id.split("-");
  return `${ms!.padStart(15, "0")}-${n!.padStart(9, "0")}`;
};
const tombstone = (from: string, to: string, scope = "*") => `${padded(from)} ${padded(to)} ${scope}`;
const eventItem = (id: string, channel = "") => ({
  pk: `EVT#dc_1#${channel}`,
  sk: `EVT#${padded(id)}`,
  type: "event",
  sourceId: "dc_1",
  id,
  channel,
  indexedAtMs: 5,
  event: "{}",
  emitId: "emit",
  meta: "{}",
});
const queries = () => ddb.commandCalls(QueryCommand).map((call) => call.args[0].input);

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbEventStore retention", () => {
  it("defaults to 30 days and puts expiresAt (epoch seconds, rounded up from the id's ms) on every event", async () => {
    expect(DEFAULT_EVENT_RETENTION).toEqual({ maxAgeMs: 30 * 24 * 3600 * 1000, keepPerChannel: 0 });
    await store.appendEvents("dc_1", [{ channel: "", event: {}, emitId: "e", meta: {} }], 1_790_000_000_123);
    const put = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems?.[1]?.Put;
    expect(put?.Item?.expiresAt).toBe(Math.ceil((1_790_000_000_123 + 30 * 24 * 3600 * 1000) / 1000));
  });

  it("puts no expiresAt when maxAgeMs is 0", async () => {
    await keepForever.appendEvents("dc_1", [{ channel: "", event: {}, emitId: "e", meta: {} }], 7);
    const put = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems?.[1]?.Put;
    expect(put?.Item).not.toHaveProperty("expiresAt");
  });

  it("skips items past expiresAt in pages and counts, since TTL deletes them only later", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 0) });
    ddb.on(QueryCommand).resolves({ Items: [], Count: 0 });
    const before = Math.floor(Date.now() / 1000);
    await store.listEvents("dc_1", { limit: 5, channel: "" });
    const after = Math.floor(Date.now() / 1000);
    expect(queries()).toHaveLength(2);
    for (const input of queries()) {
      expect(input.FilterExpression).toBe("attribute_not_exists(expiresAt) OR expiresAt > :now");
      expect(input.ExpressionAttributeValues?.[":now"]).toBeGreaterThanOrEqual(before);
      expect(input.ExpressionAttributeValues?.[":now"]).toBeLessThanOrEqual(after);
    }
  });
});

describe("DynamoDbEventStore.deleteEvents", () => {
  it("adds one tombstone to the sequence item, ending at the newest id when no end is given", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(2000, 7) });
    ddb.on(UpdateCommand).resolves({});
    await store.deleteEvents("dc_1", { fromId: "1500-3" });
    expect(ddb.commandCalls(QueryCommand)).toHaveLength(0);
    expect(ddb.commandCalls(UpdateCommand).map((call) => call.args[0].input)).toEqual([
      {
        TableName: TABLE,
        Key: SEQUENCE_KEY,
        UpdateExpression: "ADD tombstones :tombstone",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeValues: { ":tombstone": new Set([tombstone("1500-3", "2000-7")]) },
      },
    ]);
  });

  it("caps an end past the newest id, starts at 0-0 without a start, and names the channel", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(2000, 7, ["ch:", "ch:$logs"]) });
    ddb.on(UpdateCommand).resolves({});
    await store.deleteEvents("dc_1", { toId: "999999999999999-0", channel: "$logs" });
    expect(ddb.commandCalls(UpdateCommand)[0]?.args[0].input.ExpressionAttributeValues).toEqual({
      ":tombstone": new Set([tombstone("0-0", "2000-7", "ch:$logs")]),
    });
  });

  it("writes nothing for a range after the newest id, a channel without events or a source without events", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: sequenceItem(2000, 7) })
      .resolvesOnce({ Item: sequenceItem(2000, 7) })
      .resolves({});
    await store.deleteEvents("dc_1", { fromId: "2000-8" });
    await store.deleteEvents("dc_1", { channel: "custom" });
    await store.deleteEvents("dc_1", {});
    expect(ddb.commandCalls(GetCommand)).toHaveLength(3);
    expect(ddb.commandCalls(UpdateCommand)).toHaveLength(0);
  });

  it("succeeds when the sequence item was deleted meanwhile (every event is gone)", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(2000, 7) });
    ddb.on(UpdateCommand).rejects(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }));
    await expect(store.deleteEvents("dc_1", {})).resolves.toBeUndefined();
  });

  it("refuses ids that are not event ids", async () => {
    await expect(store.deleteEvents("dc_1", { fromId: "12" })).rejects.toMatchObject({ code: "validation" });
    expect(ddb.calls()).toHaveLength(0);
  });
});

describe("DynamoDbEventStore.listEvents around tombstones", () => {
  it("reads only the visible segments with sk BETWEEN, nearest first, until the page is full", async () => {
    ddb.on(GetCommand).resolves({
      Item: sequenceItem(
        100,
        9,
        ["ch:", "ch:custom"],
        [tombstone("100-3", "100-6"), tombstone("0-0", "100-0", "ch:custom")],
      ),
    });
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 1 })
      .on(QueryCommand, {
        ScanIndexForward: false,
        ExpressionAttributeValues: { ":lo": "EVT#000000000000100-000000007" },
      })
      .resolves({ Items: [eventItem("100-8"), eventItem("100-7")] })
      .on(QueryCommand, {
        ScanIndexForward: false,
        ExpressionAttributeValues: { ":hi": "EVT#000000000000100-000000002" },
      })
      .resolves({ Items: [eventItem("100-2")] });
    const page = await keepForever.listEvents("dc_1", { limit: 3, channel: "", after: "100-9" });
    expect(page.items.map((e) => e.id)).toEqual(["100-8", "100-7", "100-2"]);
    const reads = queries().filter((input) => input.Select === undefined);
    expect(reads).toEqual([
      {
        TableName: TABLE,
        KeyConditionExpression: "pk = :pk AND sk BETWEEN :lo AND :hi",
        ExpressionAttributeValues: {
          ":pk": "EVT#dc_1#",
          ":lo": "EVT#000000000000100-000000007",
          ":hi": "EVT#000000000000100-000000008",
        },
        ScanIndexForward: false,
        ConsistentRead: true,
        Limit: 3,
      },
      expect.objectContaining({
        ExpressionAttributeValues: {
          ":pk": "EVT#dc_1#",
          ":lo": "EVT#000000000000000-000000000",
          ":hi": "EVT#000000000000100-000000002",
        },
        Limit: 1,
      }),
    ]);
    // The count skips the hidden range too: one COUNT per visible segment of the whole partition.
    const counts = queries().filter((input) => input.Select === "COUNT");
    expect(
      counts.map((input) => [input.ExpressionAttributeValues?.[":lo"], input.ExpressionAttributeValues?.[":hi"]]),
    ).toEqual([
      ["EVT#000000000000000-000000000", "EVT#000000000000100-000000002"],
      ["EVT#000000000000100-000000007", "EVT#999999999999999-999999999"],
    ]);
    expect(page.totalCount).toBe(2);
  });
});

describe("DynamoDbEventStore.purgeDeletedEvents", () => {
  it("deletes each tombstone's range in each channel, then removes that tombstone only", async () => {
    const all = tombstone("5-0", "7-2");
    const logs = tombstone("1-0", "3-0", "ch:$logs");
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 0, ["ch:", "ch:$logs"], [all, logs]) });
    ddb.on(QueryCommand).resolves({ Items: [{ pk: "EVT#dc_1#", sk: "EVT#x" }] });
    const unprocessed = [{ DeleteRequest: { Key: { pk: "EVT#dc_1#", sk: "EVT#x" } } }];
    ddb
      .on(BatchWriteCommand)
      .resolvesOnce({ UnprocessedItems: { [TABLE]: unprocessed } })
      .resolves({});
    ddb.on(UpdateCommand).resolves({});
    await store.purgeDeletedEvents("dc_1");

    // The set keeps its order of insertion here; DynamoDB's own order does not matter.
    expect(queries().map((input) => input.ExpressionAttributeValues)).toEqual([
      { ":pk": "EVT#dc_1#", ":lo": "EVT#000000000000005-000000000", ":hi": "EVT#000000000000007-000000002" },
      { ":pk": "EVT#dc_1#$logs", ":lo": "EVT#000000000000005-000000000", ":hi": "EVT#000000000000007-000000002" },
      { ":pk": "EVT#dc_1#$logs", ":lo": "EVT#000000000000001-000000000", ":hi": "EVT#000000000000003-000000000" },
    ]);
    expect(queries().every((input) => input.ProjectionExpression === "pk, sk" && !input.FilterExpression)).toBe(true);
    // Three ranges, the first batch sent twice (UnprocessedItems).
    expect(ddb.commandCalls(BatchWriteCommand)).toHaveLength(4);
    expect(ddb.commandCalls(UpdateCommand).map((call) => call.args[0].input)).toEqual(
      [all, logs].map((encoded) => ({
        TableName: TABLE,
        Key: SEQUENCE_KEY,
        UpdateExpression: "DELETE tombstones :tombstone",
        ConditionExpression: "attribute_exists(pk)",
        ExpressionAttributeValues: { ":tombstone": new Set([encoded]) },
      })),
    );
  });

  it("reads one item and stops when nothing waits", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 0) });
    await store.purgeDeletedEvents("dc_1");
    expect(ddb.calls()).toHaveLength(1);
  });

  it("stops without error when deleteAllEvents removed the sequence meanwhile", async () => {
    ddb
      .on(GetCommand)
      .resolves({ Item: sequenceItem(9, 0, ["ch:"], [tombstone("1-0", "2-0"), tombstone("4-0", "5-0")]) });
    ddb.on(QueryCommand).resolves({ Items: [] });
    ddb.on(UpdateCommand).rejects(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }));
    await expect(store.purgeDeletedEvents("dc_1")).resolves.toBeUndefined();
    expect(ddb.commandCalls(UpdateCommand)).toHaveLength(1);
  });
});

describe("visibleSegments", () => {
  it("is the part of the span outside the hidden ranges, edges included", () => {
    expect(visibleSegments(0n, 100n, [])).toEqual([[0n, 100n]]);
    expect(
      visibleSegments(10n, 100n, [
        [0n, 12n],
        [20n, 30n],
        [31n, 31n],
        [50n, 100n],
      ]),
    ).toEqual([
      [13n, 19n],
      [32n, 49n],
    ]);
    expect(visibleSegments(10n, 20n, [[10n, 20n]])).toEqual([]);
    expect(visibleSegments(10n, 20n, [[200n, 300n]])).toEqual([[10n, 20n]]);
    expect(visibleSegments(5n, 4n, [])).toEqual([]);
  });
});
