import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  TransactionCanceledException,
} from "@aws-sdk/client-dynamodb";
import {
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbEventStore, visibleSegments } from "#adapters/aws/dynamodb-event-store";
import { MAX_STORED_EVENT_BYTES } from "#adapters/aws/table-design";
import type { NewEvent } from "#core/component-model";
import { DEFAULT_EVENT_RETENTION } from "#core/ports/event-store";

const TABLE = "resources-test";
const ddb = mockClient(DynamoDBDocumentClient);
const client = documentClient(new DynamoDBClient({ region: "local" }));
// Without retention: the request shapes carry no `expiresAt` ("retention" below pins it).
const store = new DynamoDbEventStore(client, TABLE, { retention: { maxAgeMs: 0, keepPerChannel: 0 } });
/** The default retention (30 days). */
const withRetention = new DynamoDbEventStore(client, TABLE);

const event = (channel = "", n = 0): NewEvent => ({
  channel,
  event: { n },
  emitId: `emit-${n}`,
  meta: { id: n, summary: `event ${n}` },
});
const SEQUENCE_KEY = { pk: "EVTSEQ#dc_1", sk: "EVTSEQ" };
const sequenceItem = (lastMs: number, lastN: number, channels = ["ch:"], tombstones: string[] = []) => ({
  ...SEQUENCE_KEY,
  type: "eventSequence",
  lastMs,
  lastN,
  channels: new Set(channels),
  ...(tombstones.length > 0 ? { tombstones: new Set(tombstones) } : {}),
});
/** An event id as its sort key orders it: `<ms:15>-<n:9>`. */
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
  event: '{"n":1}',
  emitId: "emit-1",
  meta: "{}",
});
const queries = () => ddb.commandCalls(QueryCommand).map((call) => call.args[0].input);

/**
 * A failed sequence condition as DynamoDB reports it: one reason per action, the sequence's first,
 * with the item as it was (`ALL_OLD`) unless `withItem` is false.
 */
function lostRace(lastMs: number, lastN: number, length: number, withItem = true) {
  const item = { lastMs: { N: String(lastMs) }, lastN: { N: String(lastN) }, channels: { SS: ["ch:"] } };
  return new TransactionCanceledException({
    message: "Transaction cancelled",
    $metadata: {},
    CancellationReasons: [
      { Code: "ConditionalCheckFailed", ...(withItem ? { Item: item } : {}) },
      ...Array.from({ length: length - 1 }, () => ({ Code: "None" })),
    ],
  });
}
const sequenceUpdates = () =>
  ddb.commandCalls(TransactWriteCommand).map((call) => call.args[0].input.TransactItems?.[0]?.Update);

beforeEach(() => {
  ddb.reset();
});

describe("DynamoDbEventStore.appendEvents", () => {
  it("without reading first, writes the sequence and the events in one transaction, the sequence conditioned on an older ms", async () => {
    const stored = await store.appendEvents("dc_1", [event("", 1), event("$logs", 2)], 1_790_000_000_123);
    expect(stored.map((e) => e.id)).toEqual(["1790000000123-0", "1790000000123-1"]);
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
    expect(ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems).toEqual([
      {
        Update: {
          TableName: TABLE,
          Key: SEQUENCE_KEY,
          UpdateExpression: "SET #type = :type, lastMs = :ms, lastN = :n ADD channels :channels",
          ConditionExpression: "attribute_not_exists(pk) OR lastMs < :ms",
          ExpressionAttributeNames: { "#type": "type" },
          ExpressionAttributeValues: {
            ":type": "eventSequence",
            ":ms": 1_790_000_000_123,
            ":n": 1,
            ":channels": new Set(["ch:", "ch:$logs"]),
          },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
      },
      {
        Put: {
          TableName: TABLE,
          Item: {
            pk: "EVT#dc_1#",
            sk: "EVT#001790000000123-000000000",
            type: "event",
            sourceId: "dc_1",
            id: "1790000000123-0",
            channel: "",
            indexedAtMs: 1_790_000_000_123,
            event: '{"n":1}',
            emitId: "emit-1",
            meta: '{"id":1,"summary":"event 1"}',
            // UTF-8 bytes of event and meta, subtracted from the workspace's stored totals on delete.
            storedBytes: 35,
          },
          ConditionExpression: "attribute_not_exists(pk)",
        },
      },
      {
        Put: expect.objectContaining({
          Item: expect.objectContaining({ pk: "EVT#dc_1#$logs", sk: "EVT#001790000000123-000000001" }),
        }),
      },
    ]);
  });

  it("continues the ms the cancellation reports when the source has ids at or after nowMs, without reading", async () => {
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(lostRace(2000, 4, 2))
      .resolves({});
    const stored = await store.appendEvents("dc_1", [event()], 1500);
    expect(stored.map((e) => [e.id, e.indexedAtMs])).toEqual([["2000-5", 1500]]);
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
    expect(sequenceUpdates()).toEqual([
      expect.objectContaining({ ConditionExpression: "attribute_not_exists(pk) OR lastMs < :ms" }),
      expect.objectContaining({
        ConditionExpression: "lastMs = :ms AND lastN = :prevN",
        ExpressionAttributeValues: expect.objectContaining({ ":ms": 2000, ":n": 5, ":prevN": 4 }),
      }),
    ]);
  });

  it("after losing a race again, goes on from the sequence each cancellation reported", async () => {
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(lostRace(1000, 0, 2))
      .rejectsOnce(lostRace(1000, 3, 2))
      .resolves({});
    const stored = await store.appendEvents("dc_1", [event()], 1000);
    expect(stored.map((e) => e.id)).toEqual(["1000-4"]);
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
    expect(sequenceUpdates().map((u) => u?.ExpressionAttributeValues)).toEqual([
      expect.objectContaining({ ":ms": 1000, ":n": 0 }),
      expect.objectContaining({ ":prevN": 0, ":n": 1 }),
      expect.objectContaining({ ":prevN": 3, ":n": 4 }),
    ]);
  });

  it("reads the sequence when a cancellation does not report it", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(1000, 2) });
    ddb
      .on(TransactWriteCommand)
      .rejectsOnce(lostRace(0, 0, 2, false))
      .resolves({});
    await expect(store.appendEvents("dc_1", [event()], 1000)).resolves.toMatchObject([{ id: "1000-3" }]);
    expect(ddb.commandCalls(GetCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: SEQUENCE_KEY,
      ConsistentRead: true,
    });
  });

  it("reads the sequence after a transaction conflict", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(1000, 8) });
    const busy = new TransactionCanceledException({
      message: "Transaction cancelled",
      $metadata: {},
      CancellationReasons: [{ Code: "TransactionConflict" }, { Code: "None" }],
    });
    ddb.on(TransactWriteCommand).rejectsOnce(busy).resolves({});
    await expect(store.appendEvents("dc_1", [event()], 1000)).resolves.toMatchObject([{ id: "1000-9" }]);
    expect(ddb.commandCalls(GetCommand)).toHaveLength(1);
  });

  it("lets any other failure propagate unchanged", async () => {
    ddb.on(GetCommand).resolves({});
    const error = new Error("network down");
    ddb.on(TransactWriteCommand).rejects(error);
    await expect(store.appendEvents("dc_1", [event()], 1)).rejects.toBe(error);
  });

  it("splits a large batch into transactions of at most 100 actions, each continuing the one before", async () => {
    const stored = await store.appendEvents(
      "dc_1",
      Array.from({ length: 150 }, (_, n) => event("", n)),
      7,
    );
    expect(stored.map((e) => e.id)).toEqual(Array.from({ length: 150 }, (_, n) => `7-${n}`));
    const sizes = ddb.commandCalls(TransactWriteCommand).map((call) => call.args[0].input.TransactItems?.length);
    expect(sizes).toEqual([100, 52]);
    expect(sequenceUpdates()[1]).toMatchObject({
      ConditionExpression: "lastMs = :ms AND lastN = :prevN",
      ExpressionAttributeValues: { ":ms": 7, ":prevN": 98, ":n": 149 },
    });
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
  });

  it("refuses an event over the stored size limit before writing anything", async () => {
    const big = event("", 2);
    big.event = { body: "x".repeat(MAX_STORED_EVENT_BYTES) };
    await expect(store.appendEvents("dc_1", [event(), big], 1)).rejects.toMatchObject({ code: "payload_too_large" });
    expect(ddb.commandCalls(GetCommand)).toHaveLength(0);
    expect(ddb.commandCalls(TransactWriteCommand)).toHaveLength(0);
  });

  it("writes an event's JSON text as the caller made it (eventJson), measured as written", async () => {
    const given = { ...event("", 1), eventJson: '{ "n": 1 }' };
    await store.appendEvents("dc_1", [given], 1);
    const put = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems?.[1]?.Put;
    // Its size, which the stored totals subtract when the item goes, is the written text's.
    const storedBytes = Buffer.byteLength('{ "n": 1 }') + Buffer.byteLength(JSON.stringify(given.meta));
    expect(put?.Item).toMatchObject({ event: '{ "n": 1 }', storedBytes });
    expect(put?.Item).not.toHaveProperty("eventJson");
  });

  it("sends nothing for an empty batch", async () => {
    await expect(store.appendEvents("dc_1", [], 1)).resolves.toEqual([]);
    expect(ddb.calls()).toHaveLength(0);
  });
});

describe("DynamoDbEventStore.listEvents", () => {
  it("queries one channel's partition from the padded cursor, newest first, and counts it", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(1000, 12) });
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 12 })
      .on(QueryCommand, { ScanIndexForward: false })
      .resolves({ Items: [eventItem("1000-9")] });
    const page = await store.listEvents("dc_1", { limit: 5, channel: "", after: "1000-10" });
    expect(page).toEqual({
      items: [
        {
          sourceId: "dc_1",
          id: "1000-9",
          indexedAtMs: 5,
          channel: "",
          event: { n: 1 },
          emitId: "emit-1",
          meta: {},
        },
      ],
      totalCount: 12,
    });
    // The sequence item: its tombstones (none here) are ranges deleted but not purged yet.
    expect(ddb.commandCalls(GetCommand)).toHaveLength(1);
    const query = ddb.commandCalls(QueryCommand).find((call) => call.args[0].input.ScanIndexForward === false);
    expect(query?.args[0].input).toEqual({
      TableName: TABLE,
      KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: { ":pk": "EVT#dc_1#", ":prefix": "EVT#" },
      ScanIndexForward: false,
      Limit: 5,
      ConsistentRead: true,
      ExclusiveStartKey: { pk: "EVT#dc_1#", sk: "EVT#000000000001000-000000010" },
    });
  });

  it("merges the channels named by the sequence item when no channel is given", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(3, 2, ["ch:", "ch:custom"]) });
    ddb
      .on(QueryCommand, { Select: "COUNT" })
      .resolves({ Count: 2 })
      .on(QueryCommand, {
        ScanIndexForward: false,
        ExpressionAttributeValues: { ":pk": "EVT#dc_1#", ":prefix": "EVT#" },
      })
      .resolves({ Items: [eventItem("3-2"), eventItem("1-0")] })
      .on(QueryCommand, {
        ScanIndexForward: false,
        ExpressionAttributeValues: { ":pk": "EVT#dc_1#custom", ":prefix": "EVT#" },
      })
      .resolves({ Items: [eventItem("2-0", "custom")] });
    const page = await store.listEvents("dc_1", { limit: 2 });
    expect(page.items.map((e) => e.id)).toEqual(["3-2", "2-0"]);
    expect(page.totalCount).toBe(4);
  });

  it("reads the sequence once and each channel once, without COUNT, when the count is not wanted (stream polls)", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(3, 2, ["ch:", "ch:custom", "ch:$logs"]) });
    ddb.on(QueryCommand).resolves({ Items: [] });
    expect(await store.listEvents("dc_1", { limit: 100, before: "1-0", count: false })).toEqual({
      items: [],
      totalCount: 0,
    });
    expect(ddb.commandCalls(GetCommand)).toHaveLength(1);
    expect(queries().map((input) => [input.ExpressionAttributeValues?.[":pk"], input.Select])).toEqual([
      ["EVT#dc_1#", undefined],
      ["EVT#dc_1#custom", undefined],
    ]);
  });

  it("rejects a cursor that is not an event id", async () => {
    await expect(store.listEvents("dc_1", { limit: 5, channel: "", before: "nope" })).rejects.toMatchObject({
      code: "validation",
    });
  });
});

describe("DynamoDbEventStore.deleteAllEvents", () => {
  it("deletes each channel's events in batches of 25, then the sequence if no append came in", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 29) });
    const keys = Array.from({ length: 30 }, (_, n) => ({ pk: "EVT#dc_1#", sk: `EVT#${n}` }));
    ddb.on(QueryCommand).resolves({ Items: keys });
    ddb.on(BatchWriteCommand).resolves({});
    await store.deleteAllEvents("dc_1");

    expect(ddb.commandCalls(QueryCommand)[0]?.args[0].input).toMatchObject({
      ExpressionAttributeValues: { ":pk": "EVT#dc_1#", ":prefix": "EVT#" },
      ProjectionExpression: "pk, sk, storedBytes",
    });
    const batches = ddb.commandCalls(BatchWriteCommand).map((call) => call.args[0].input.RequestItems?.[TABLE]);
    expect(batches.map((batch) => batch?.length)).toEqual([25, 5]);
    expect(batches[0]?.[0]).toEqual({ DeleteRequest: { Key: { pk: "EVT#dc_1#", sk: "EVT#0" } } });
    expect(ddb.commandCalls(DeleteCommand)[0]?.args[0].input).toEqual({
      TableName: TABLE,
      Key: SEQUENCE_KEY,
      ConditionExpression: "lastMs = :ms AND lastN = :n",
      ExpressionAttributeValues: { ":ms": 9, ":n": 29 },
    });
  });

  it("goes again when an append moved the sequence during the deletion", async () => {
    ddb
      .on(GetCommand)
      .resolvesOnce({ Item: sequenceItem(9, 1) })
      .resolves({ Item: sequenceItem(9, 2) });
    ddb.on(QueryCommand).resolves({ Items: [] });
    ddb
      .on(DeleteCommand)
      .rejectsOnce(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }))
      .resolves({});
    await store.deleteAllEvents("dc_1");
    expect(ddb.commandCalls(DeleteCommand).map((call) => call.args[0].input.ExpressionAttributeValues)).toEqual([
      { ":ms": 9, ":n": 1 },
      { ":ms": 9, ":n": 2 },
    ]);
  });

  it("retries unprocessed deletes", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 1) });
    ddb.on(QueryCommand).resolves({ Items: [{ pk: "EVT#dc_1#", sk: "EVT#1" }] });
    const unprocessed = [{ DeleteRequest: { Key: { pk: "EVT#dc_1#", sk: "EVT#1" } } }];
    ddb
      .on(BatchWriteCommand)
      .resolvesOnce({ UnprocessedItems: { [TABLE]: unprocessed } })
      .resolves({});
    await store.deleteAllEvents("dc_1");
    expect(ddb.commandCalls(BatchWriteCommand)).toHaveLength(2);
  });

  it("does nothing more than one read for a source without events", async () => {
    ddb.on(GetCommand).resolves({});
    await store.deleteAllEvents("dc_1");
    expect(ddb.calls()).toHaveLength(1);
  });
});

describe("DynamoDbEventStore retention", () => {
  it("defaults to 30 days and puts expiresAt (epoch seconds, rounded up from the id's ms) on every event", async () => {
    expect(DEFAULT_EVENT_RETENTION).toEqual({ maxAgeMs: 30 * 24 * 3600 * 1000, keepPerChannel: 0 });
    await withRetention.appendEvents("dc_1", [event()], 1_790_000_000_123);
    const put = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems?.[1]?.Put;
    expect(put?.Item?.expiresAt).toBe(Math.ceil((1_790_000_000_123 + 30 * 24 * 3600 * 1000) / 1000));
  });

  it("puts no expiresAt when maxAgeMs is 0", async () => {
    await store.appendEvents("dc_1", [event()], 7);
    const put = ddb.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems?.[1]?.Put;
    expect(put?.Item).not.toHaveProperty("expiresAt");
  });

  it("skips items past expiresAt in pages and counts, since TTL deletes them only later", async () => {
    ddb.on(GetCommand).resolves({ Item: sequenceItem(9, 0) });
    ddb.on(QueryCommand).resolves({ Items: [], Count: 0 });
    const before = Math.floor(Date.now() / 1000);
    await withRetention.listEvents("dc_1", { limit: 5, channel: "" });
    const after = Math.floor(Date.now() / 1000);
    expect(queries()).toHaveLength(2);
    for (const input of queries()) {
      expect(input.FilterExpression).toBe("attribute_not_exists(#ttl) OR #ttl > :now");
      expect(input.ExpressionAttributeNames?.["#ttl"]).toBe("expiresAt");
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
    const page = await store.listEvents("dc_1", { limit: 3, channel: "", after: "100-9" });
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
    await withRetention.purgeDeletedEvents("dc_1");

    // The set keeps its order of insertion here; DynamoDB's own order does not matter.
    expect(queries().map((input) => input.ExpressionAttributeValues)).toEqual([
      { ":pk": "EVT#dc_1#", ":lo": "EVT#000000000000005-000000000", ":hi": "EVT#000000000000007-000000002" },
      { ":pk": "EVT#dc_1#$logs", ":lo": "EVT#000000000000005-000000000", ":hi": "EVT#000000000000007-000000002" },
      { ":pk": "EVT#dc_1#$logs", ":lo": "EVT#000000000000001-000000000", ":hi": "EVT#000000000000003-000000000" },
    ]);
    expect(
      queries().every((input) => input.ProjectionExpression === "pk, sk, storedBytes" && !input.FilterExpression),
    ).toBe(true);
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
    await withRetention.purgeDeletedEvents("dc_1");
    expect(ddb.calls()).toHaveLength(1);
  });

  it("stops without error when deleteAllEvents removed the sequence meanwhile", async () => {
    ddb
      .on(GetCommand)
      .resolves({ Item: sequenceItem(9, 0, ["ch:"], [tombstone("1-0", "2-0"), tombstone("4-0", "5-0")]) });
    ddb.on(QueryCommand).resolves({ Items: [] });
    ddb.on(UpdateCommand).rejects(new ConditionalCheckFailedException({ message: "failed", $metadata: {} }));
    await expect(withRetention.purgeDeletedEvents("dc_1")).resolves.toBeUndefined();
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
