import {
  BatchWriteCommand,
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  TransactWriteCommand,
} from "@aws-sdk/lib-dynamodb";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { DomainError, invalid } from "#core/errors";
import type { Page } from "#core/pagination";
import type { EventQuery, EventStore } from "#ports/event-store";
import { failedConditionIndexes, isConditionalCheckFailed, isTransactionConflict } from "./dynamodb-errors.ts";
import { collectionQuery, countAll, type Item, queryPages, queryUpTo, sendUntilProcessed } from "./dynamodb-paging.ts";
import { MAX_STORED_EVENT_BYTES, MAX_STORED_EVENT_META_BYTES, resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

/** TransactWriteItems takes 100 actions (one is the sequence update) and 4 MB in all. */
const EVENTS_PER_TRANSACTION = 99;
const TRANSACTION_BYTES = 3 * 1024 * 1024;
/** BatchWriteItem takes 25 requests. */
const BATCH_WRITE_LIMIT = 25;
/**
 * Appends lost to a concurrent appender of the same source are retried this often. Every lost
 * attempt (but a first one that found the ms taken already) means another append committed, so
 * the source as a whole always makes progress; the bound only stops one appender from starving
 * forever under a sustained burst.
 */
const APPEND_ATTEMPTS = 100;
const BATCH_WRITE_ATTEMPTS = 8;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Channel names in the sequence item's string set; prefixed so the default channel is not `""`. */
const CHANNEL_MARK = "ch:";

/** `<ms>-<n>` as numbers. The core validates cursors; this only refuses what it cannot order. */
function parseEventId(id: string, field: string): [number, number] {
  const match = /^(\d{1,15})-(\d{1,9})$/.exec(id);
  if (!match) throw invalid(field, "is not an event id");
  return [Number(match[1]), Number(match[2])];
}

interface EncodedEvent {
  source: NewEvent;
  event: string;
  meta: string;
  bytes: number;
}

function encode(source: NewEvent): EncodedEvent {
  const event = JSON.stringify(source.event);
  const meta = JSON.stringify(source.meta);
  const eventBytes = Buffer.byteLength(event, "utf8");
  const metaBytes = Buffer.byteLength(meta, "utf8");
  if (eventBytes > MAX_STORED_EVENT_BYTES) {
    throw new DomainError(
      "payload_too_large",
      `an event of ${eventBytes} bytes is too large to store: at most ${MAX_STORED_EVENT_BYTES}`,
    );
  }
  if (metaBytes > MAX_STORED_EVENT_META_BYTES) {
    throw new DomainError(
      "payload_too_large",
      `event metadata of ${metaBytes} bytes is too large to store: at most ${MAX_STORED_EVENT_META_BYTES}`,
    );
  }
  // Keys and the other attributes add well under 1 KB.
  return { source, event, meta, bytes: eventBytes + metaBytes + 1024 };
}

/** Consecutive runs of events that each fit in one transaction. */
function chunks(events: EncodedEvent[]): EncodedEvent[][] {
  const result: EncodedEvent[][] = [];
  let current: EncodedEvent[] = [];
  let bytes = 0;
  for (const event of events) {
    if (current.length === EVENTS_PER_TRANSACTION || (current.length > 0 && bytes + event.bytes > TRANSACTION_BYTES)) {
      result.push(current);
      current = [];
      bytes = 0;
    }
    current.push(event);
    bytes += event.bytes;
  }
  if (current.length > 0) result.push(current);
  return result;
}

const fromItem = (item: Item): StoredEvent => ({
  sourceId: String(item.sourceId),
  id: String(item.id),
  indexedAtMs: Number(item.indexedAtMs),
  channel: String(item.channel),
  event: JSON.parse(String(item.event)),
  emitId: String(item.emitId),
  meta: JSON.parse(String(item.meta)),
});

/** The last id handed out for a source. */
interface Position {
  lastMs: number;
  lastN: number;
}

interface Sequence extends Position {
  channels: string[];
}

/**
 * The position the sequence item held when a cancelled append's first action (the sequence
 * update, asked for `ALL_OLD`) found its condition false; undefined when the cancellation does not
 * carry it. The SDK leaves the item in DynamoDB's wire format.
 */
function positionFromCancellation(error: unknown): Position | undefined {
  const reasons = (error as { CancellationReasons?: { Item?: Record<string, { N?: string }> }[] }).CancellationReasons;
  const item = reasons?.[0]?.Item;
  if (item?.lastMs?.N === undefined || item.lastN?.N === undefined) return undefined;
  return { lastMs: Number(item.lastMs.N), lastN: Number(item.lastN.N) };
}

/**
 * `EventStore` on a DynamoDB table with the resources table's key schema (docs/table-design.md,
 * "Events"). Each source has a sequence item holding the last id handed out; an append writes the
 * events and the advanced sequence in one transaction, conditioned on the sequence: older than
 * `nowMs` when the append starts a new ms (the common case, which needs no read first), or exactly
 * the last id when it continues one. Two appenders that would take the same ids cannot both
 * commit, so ids are unique and increasing, and events become visible in id order (a reader
 * following the newest id never misses one that commits later with a smaller id). The loser goes
 * again from the sequence its cancellation reports.
 */
export class DynamoDbEventStore implements EventStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async appendEvents(sourceId: string, events: NewEvent[], nowMs: number): Promise<StoredEvent[]> {
    // Every size is checked before anything is written, so an oversized event stores nothing.
    const encoded = events.map(encode);
    const stored: StoredEvent[] = [];
    // Unknown at first; after a chunk, the position it committed, which the next chunk continues.
    let last: Position | undefined;
    for (const chunk of chunks(encoded)) {
      const appended = await this.appendChunk(sourceId, chunk, nowMs, last);
      stored.push(...appended.events);
      last = appended.position;
    }
    return stored;
  }

  async listEvents(sourceId: string, query: EventQuery): Promise<Page<StoredEvent>> {
    let channels: string[];
    if (query.channel !== undefined) channels = [query.channel];
    // Without a channel: every channel but the reserved ones (`$logs`, `$errors`, ...).
    else channels = ((await this.getSequence(sourceId))?.channels ?? []).filter((name) => !name.startsWith("$"));

    // The cursor's (ms, n): the start key in each partition, whether or not an event has that id.
    const cursor = (() => {
      if (query.after !== undefined) return parseEventId(query.after, "after");
      if (query.before !== undefined) return parseEventId(query.before, "before");
      return undefined;
    })();
    const forward = query.after === undefined && query.before !== undefined;
    // Each channel's partition is read up to `limit` items from the cursor; the nearest `limit` of
    // all of them are the page.
    const perChannel = await Promise.all(
      channels.map(async (channel) => {
        const partition = collectionQuery(
          this.tableName,
          resourceKeys.eventPartition(sourceId, channel),
          SORT_KEY_PREFIX.event,
        );
        const start = cursor && { ExclusiveStartKey: resourceKeys.event(sourceId, channel, ...cursor) };
        const [items, count] = await Promise.all([
          queryUpTo(this.client, { ...partition, ScanIndexForward: forward, ...start }, query.limit),
          countAll(this.client, partition),
        ]);
        return { items, count };
      }),
    );
    const merged = perChannel.flatMap((result) => result.items);
    const bySortKey = (a: Item, b: Item) => (String(a.sk) < String(b.sk) ? -1 : String(a.sk) > String(b.sk) ? 1 : 0);
    merged.sort(forward ? bySortKey : (a, b) => bySortKey(b, a));
    const page = merged.slice(0, query.limit);
    if (forward) page.reverse();
    return {
      items: page.map(fromItem),
      totalCount: perChannel.reduce((sum, result) => sum + result.count, 0),
    };
  }

  async deleteAllEvents(sourceId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const sequence = await this.getSequence(sourceId);
      if (!sequence) return;
      for (const channel of sequence.channels)
        await this.deletePartition(resourceKeys.eventPartition(sourceId, channel));
      try {
        // Removed last, and only if no append came in meanwhile: otherwise go again, so nothing
        // appended before this call returns survives it.
        await this.client.send(
          new DeleteCommand({
            TableName: this.tableName,
            Key: resourceKeys.eventSequence(sourceId),
            ConditionExpression: "lastMs = :ms AND lastN = :n",
            ExpressionAttributeValues: { ":ms": sequence.lastMs, ":n": sequence.lastN },
          }),
        );
        return;
      } catch (error) {
        if (!isConditionalCheckFailed(error) || attempt >= APPEND_ATTEMPTS) throw error;
      }
    }
  }

  /** Appends one transaction's worth of events; `last` is the sequence's position when known. */
  private async appendChunk(
    sourceId: string,
    chunk: EncodedEvent[],
    nowMs: number,
    last: Position | undefined,
  ): Promise<{ events: StoredEvent[]; position: Position }> {
    const channels = new Set(chunk.map((event) => `${CHANNEL_MARK}${event.source.channel}`));
    for (let attempt = 1; ; attempt++) {
      // The ms to continue when the source already has ids at or after `nowMs`; else a new one.
      const continued = last && last.lastMs >= nowMs ? last : undefined;
      const ms = continued?.lastMs ?? nowMs;
      const firstN = continued ? continued.lastN + 1 : 0;
      const position = { lastMs: ms, lastN: firstN + chunk.length - 1 };
      const stored = chunk.map(
        ({ source }, index): StoredEvent => ({
          sourceId,
          id: `${ms}-${firstN + index}`,
          indexedAtMs: nowMs,
          channel: source.channel,
          event: source.event,
          emitId: source.emitId,
          meta: source.meta,
        }),
      );
      const sequenceUpdate = {
        Update: {
          TableName: this.tableName,
          Key: resourceKeys.eventSequence(sourceId),
          UpdateExpression: "SET #type = :type, lastMs = :ms, lastN = :n ADD channels :channels",
          // The ids taken must all be above every id handed out: a new ms needs only an older
          // last ms (so no read comes first), continuing one needs exactly the last id.
          ConditionExpression: continued
            ? "lastMs = :ms AND lastN = :prevN"
            : "attribute_not_exists(pk) OR lastMs < :ms",
          ExpressionAttributeNames: { "#type": "type" },
          ExpressionAttributeValues: {
            ":type": "eventSequence",
            ":ms": ms,
            ":n": position.lastN,
            ":channels": channels,
            ...(continued ? { ":prevN": continued.lastN } : {}),
          },
          // A lost race then reports the sequence as it is, which saves reading it.
          ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
        },
      };
      const puts = stored.map((event, index) => ({
        Put: {
          TableName: this.tableName,
          Item: {
            ...resourceKeys.event(sourceId, event.channel, ms, firstN + index),
            type: "event",
            sourceId,
            id: event.id,
            channel: event.channel,
            indexedAtMs: nowMs,
            event: chunk[index]?.event,
            emitId: event.emitId,
            meta: chunk[index]?.meta,
          },
          ConditionExpression: "attribute_not_exists(pk)",
        },
      }));
      try {
        await this.client.send(new TransactWriteCommand({ TransactItems: [sequenceUpdate, ...puts] }));
        return { events: stored, position };
      } catch (error) {
        if (attempt >= APPEND_ATTEMPTS) throw error;
        if (failedConditionIndexes(error).includes(0)) {
          // The source has ids at or after this ms, or another append committed first: go again
          // from the sequence as it is.
          last = positionFromCancellation(error) ?? (await this.getSequence(sourceId));
        } else if (isTransactionConflict(error)) {
          // Another append is committing right now: give it a few ms, jittered so the waiting
          // appenders do not all come back together.
          await sleep(Math.random() * 20);
          last = await this.getSequence(sourceId);
        } else {
          throw error;
        }
      }
    }
  }

  private async getSequence(sourceId: string): Promise<Sequence | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.eventSequence(sourceId), ConsistentRead: true }),
    );
    if (!Item) return undefined;
    const marked = Item.channels instanceof Set ? [...(Item.channels as Set<string>)] : [];
    return {
      lastMs: Number(Item.lastMs),
      lastN: Number(Item.lastN),
      channels: marked.map((value) => value.slice(CHANNEL_MARK.length)),
    };
  }

  /** Deletes every event of one partition: its keys page by page, in batches of 25. */
  private async deletePartition(pk: string): Promise<void> {
    const keysOnly = { ...collectionQuery(this.tableName, pk, SORT_KEY_PREFIX.event), ProjectionExpression: "pk, sk" };
    for await (const page of queryPages(this.client, keysOnly)) {
      const keys = (page.Items ?? []).map((item) => ({ pk: item.pk, sk: item.sk }));
      for (let start = 0; start < keys.length; start += BATCH_WRITE_LIMIT) {
        const deletes = keys.slice(start, start + BATCH_WRITE_LIMIT).map((Key) => ({ DeleteRequest: { Key } }));
        await sendUntilProcessed("BatchWriteItem", deletes, BATCH_WRITE_ATTEMPTS, async (pending) => {
          const out = await this.client.send(new BatchWriteCommand({ RequestItems: { [this.tableName]: pending } }));
          return (out.UnprocessedItems?.[this.tableName] ?? []) as typeof pending;
        });
      }
    }
  }
}
