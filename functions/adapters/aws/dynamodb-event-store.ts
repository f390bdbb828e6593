import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  type QueryCommandInput,
  TransactWriteCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { DomainError } from "#core/errors";
import { requireEventId } from "#core/event-ids";
import type { Page } from "#core/pagination";
import {
  DEFAULT_EVENT_RETENTION,
  type EventQuery,
  type EventRange,
  type EventRetention,
  type EventStore,
} from "#core/ports/event-store";
import { consecutiveBatches } from "./batches.ts";
import { failedConditionIndexes, isConditionalCheckFailed, isTransactionConflict } from "./dynamodb-errors.ts";
import { collectionQuery, countAll, deleteAllMatching, type Item, queryUpTo, sleep } from "./dynamodb-paging.ts";
import { subtractStoredEvents } from "./dynamodb-usage-store.ts";
import {
  eventSortKey,
  MAX_STORED_EVENT_BYTES,
  MAX_STORED_EVENT_META_BYTES,
  resourceKeys,
  SORT_KEY_PREFIX,
} from "./table-design.ts";

/** TransactWriteItems takes 100 actions (one is the sequence update) and 4 MB in all. */
const EVENTS_PER_TRANSACTION = 99;
const TRANSACTION_BYTES = 3 * 1024 * 1024;
/**
 * Appends lost to a concurrent appender of the same source are retried this often. Every lost
 * attempt (but a first one that found the ms taken already) means another append committed, so
 * the source as a whole always makes progress; the bound only stops one appender from starving
 * forever under a sustained burst.
 */
const APPEND_ATTEMPTS = 100;

/** What a purge reads of each event item it deletes: its key and its size for the stored totals. */
const REMOVED_ITEM = "pk, sk, storedBytes";

/** Channel names in the sequence item's string set; prefixed so the default channel is not `""`. */
const CHANNEL_MARK = "ch:";

/**
 * An id `(ms, n)` as one number, `ms * 10^9 + n`, so that ranges are plain intervals: the next id
 * is `key + 1`. Ids have at most 15 + 9 digits, past `Number`'s exact range, hence bigint.
 */
const N_SPAN = 1_000_000_000n;
const MAX_KEY = 10n ** 24n - 1n;
const keyOf = ([ms, n]: readonly [number, number]): bigint => BigInt(ms) * N_SPAN + BigInt(n);
const paddedOf = (key: bigint): string => eventSortKey(Number(key / N_SPAN), Number(key % N_SPAN));
const keyOfPadded = (padded: string): bigint => BigInt(padded.slice(0, 15)) * N_SPAN + BigInt(padded.slice(16));
const PADDED_LENGTH = 25;

/**
 * A range hidden by `deleteEvents` and not purged yet. Stored in the sequence item's string set
 * `tombstones` as `<from:15>-<from:9> <to:15>-<to:9> <scope>`, the scope `*` (every channel) or
 * `ch:<channel>`: a set, so adding one and removing the ones purged are single atomic actions
 * that leave the others alone, and the same deletion twice is one tombstone.
 */
interface Tombstone {
  encoded: string;
  from: bigint;
  to: bigint;
  /** Undefined: every channel. */
  channel: string | undefined;
}

function encodeTombstone(from: bigint, to: bigint, channel: string | undefined): string {
  return `${paddedOf(from)} ${paddedOf(to)} ${channel === undefined ? "*" : `${CHANNEL_MARK}${channel}`}`;
}

function decodeTombstone(encoded: string): Tombstone {
  const scope = encoded.slice(2 * PADDED_LENGTH + 2);
  return {
    encoded,
    from: keyOfPadded(encoded.slice(0, PADDED_LENGTH)),
    to: keyOfPadded(encoded.slice(PADDED_LENGTH + 1, 2 * PADDED_LENGTH + 1)),
    channel: scope === "*" ? undefined : scope.slice(CHANNEL_MARK.length),
  };
}

/** The ranges hidden in one channel, sorted and merged into disjoint intervals. */
function hiddenIn(tombstones: Tombstone[], channel: string): [bigint, bigint][] {
  const ranges = tombstones
    .filter((tombstone) => tombstone.channel === undefined || tombstone.channel === channel)
    .map((tombstone): [bigint, bigint] => [tombstone.from, tombstone.to])
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const merged: [bigint, bigint][] = [];
  for (const [from, to] of ranges) {
    const last = merged[merged.length - 1];
    if (last && from <= last[1] + 1n) last[1] = to > last[1] ? to : last[1];
    else merged.push([from, to]);
  }
  return merged;
}

/** The parts of `[lo, hi]` outside the (sorted, disjoint) hidden ranges, in ascending order. */
export function visibleSegments(lo: bigint, hi: bigint, hidden: [bigint, bigint][]): [bigint, bigint][] {
  const segments: [bigint, bigint][] = [];
  let start = lo;
  for (const [from, to] of hidden) {
    if (start > hi) break;
    if (to < start) continue;
    if (from > hi) break;
    if (from > start) segments.push([start, from - 1n]);
    start = to + 1n;
  }
  if (start <= hi) segments.push([start, hi]);
  return segments;
}

/** Where one list reads: keys `lo` to `hi` (inclusive), newest first unless `forward`. */
interface ReadSpan {
  forward: boolean;
  lo: bigint;
  hi: bigint;
  /** The cursor, the exclusive start of a read that sees no hidden range. */
  cursor?: [number, number];
}

interface EncodedEvent {
  source: NewEvent;
  event: string;
  meta: string;
  /** UTF-8 bytes of `event` and `meta`: what stored totals count. */
  size: number;
  /** An upper bound of the item's size. */
  bytes: number;
}

function encode(source: NewEvent): EncodedEvent {
  const event = source.eventJson ?? JSON.stringify(source.event);
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
  return { source, event, meta, size: eventBytes + metaBytes, bytes: eventBytes + metaBytes + 1024 };
}

/** Consecutive runs of events that each fit in one transaction. */
const chunks = (events: EncodedEvent[]): EncodedEvent[][] =>
  consecutiveBatches(events, {
    maxItems: EVENTS_PER_TRANSACTION,
    maxBytes: TRANSACTION_BYTES,
    sizeOf: (event) => event.bytes,
  });

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
  tombstones: Tombstone[];
}

export interface DynamoDbEventStoreOptions {
  /**
   * `maxAgeMs` sets `expiresAt` (epoch seconds) on every event, which the table's TTL deletes and
   * reads skip; `keepPerChannel` is not enforced on AWS (docs/table-design.md, "Events").
   * @default DEFAULT_EVENT_RETENTION
   */
  retention?: EventRetention;
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
 *
 * `deleteEvents` only records the range as a tombstone on the sequence item, which every list
 * reads first and skips; `purgeDeletedEvents` deletes the items and then the tombstone. With a
 * `maxAgeMs`, every event carries `expiresAt` for the table's TTL, and reads skip expired ones.
 */
export class DynamoDbEventStore implements EventStore {
  private readonly maxAgeMs: number;

  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    options: DynamoDbEventStoreOptions = {},
  ) {
    this.maxAgeMs = (options.retention ?? DEFAULT_EVENT_RETENTION).maxAgeMs;
  }

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
    // The cursor's (ms, n): where the read starts in each partition, whether or not an event has that id.
    const cursor = (() => {
      if (query.after !== undefined) return requireEventId(query.after, "after");
      if (query.before !== undefined) return requireEventId(query.before, "before");
      return undefined;
    })();
    // The sequence names the channels and holds the ranges deleted but not purged yet.
    const sequence = await this.getSequence(sourceId);
    if (!sequence) return { items: [], totalCount: 0 };
    const channels =
      query.channel === undefined
        ? // Without a channel: every channel but the reserved ones (`$logs`, `$errors`, ...).
          sequence.channels.filter((name) => !name.startsWith("$"))
        : sequence.channels.filter((name) => name === query.channel);
    const forward = query.after === undefined && query.before !== undefined;
    const read: ReadSpan = {
      forward,
      lo: query.before !== undefined && cursor ? keyOf(cursor) + 1n : 0n,
      hi: query.after !== undefined && cursor ? keyOf(cursor) - 1n : MAX_KEY,
      ...(cursor ? { cursor } : {}),
    };
    const nowSeconds = Math.floor(Date.now() / 1000);
    // Each channel's partition is read up to `limit` items from the cursor; the nearest `limit` of
    // all of them are the page.
    const perChannel = await Promise.all(
      channels.map(async (channel) => {
        const hidden = hiddenIn(sequence.tombstones, channel);
        const [items, count] = await Promise.all([
          this.readVisible(sourceId, channel, hidden, read, query.limit, nowSeconds),
          query.count === false ? 0 : this.countVisible(sourceId, channel, hidden, nowSeconds),
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

  /**
   * Hides the range at once by adding a tombstone to the sequence item (one read, one small
   * write, whatever the range holds); {@link purgeDeletedEvents} deletes the items later. The end
   * is capped at the newest id the sequence holds now: appends take larger ids, so a tombstone
   * never covers an event appended after this call.
   */
  async deleteEvents(sourceId: string, range: EventRange): Promise<void> {
    const from = range.fromId === undefined ? 0n : keyOf(requireEventId(range.fromId, "fromId"));
    const requestedTo = range.toId === undefined ? MAX_KEY : keyOf(requireEventId(range.toId, "toId"));
    const sequence = await this.getSequence(sourceId);
    if (!sequence) return;
    if (range.channel !== undefined && !sequence.channels.includes(range.channel)) return;
    const newest = keyOf([sequence.lastMs, sequence.lastN]);
    const to = requestedTo < newest ? requestedTo : newest;
    if (from > to) return;
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: resourceKeys.eventSequence(sourceId),
          UpdateExpression: "ADD tombstones :tombstone",
          // Never re-create a sequence that deleteAllEvents removed meanwhile: nothing is left to hide.
          ConditionExpression: "attribute_exists(pk)",
          ExpressionAttributeValues: { ":tombstone": new Set([encodeTombstone(from, to, range.channel)]) },
        }),
      );
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
    }
  }

  /**
   * Deletes the items of every tombstone (a key-only `Query` of its range per channel, then
   * `BatchWriteItem`), then removes that tombstone from the set. Removing only the tombstones it
   * purged keeps one added meanwhile; a tombstone's range holds no event appended after it was
   * written, so once its items are deleted it is done. Running it again (or twice at once)
   * deletes what is already gone, which DynamoDB accepts.
   */
  async purgeDeletedEvents(sourceId: string): Promise<void> {
    const sequence = await this.getSequence(sourceId);
    if (!sequence) return;
    for (const tombstone of sequence.tombstones) {
      const channels = tombstone.channel === undefined ? sequence.channels : [tombstone.channel];
      for (const channel of channels) {
        await deleteAllMatching(
          this.client,
          this.tableName,
          { ...this.between(sourceId, channel, tombstone.from, tombstone.to), ProjectionExpression: REMOVED_ITEM },
          (items) => this.subtractStored(sourceId, items),
        );
      }
      try {
        await this.client.send(
          new UpdateCommand({
            TableName: this.tableName,
            Key: resourceKeys.eventSequence(sourceId),
            UpdateExpression: "DELETE tombstones :tombstone",
            ConditionExpression: "attribute_exists(pk)",
            ExpressionAttributeValues: { ":tombstone": new Set([tombstone.encoded]) },
          }),
        );
      } catch (error) {
        // deleteAllEvents removed the sequence (and every event) meanwhile.
        if (isConditionalCheckFailed(error)) return;
        throw error;
      }
    }
  }

  async deleteAllEvents(sourceId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const sequence = await this.getSequence(sourceId);
      if (!sequence) return;
      for (const channel of sequence.channels) {
        await deleteAllMatching(
          this.client,
          this.tableName,
          {
            ...collectionQuery(this.tableName, resourceKeys.eventPartition(sourceId, channel), SORT_KEY_PREFIX.event),
            ProjectionExpression: REMOVED_ITEM,
          },
          (items) => this.subtractStored(sourceId, items),
        );
      }
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

  /**
   * Up to `limit` visible events of one channel in `read`'s direction. Without hidden ranges, one
   * query from the cursor (as `ExclusiveStartKey`); with some, one `sk BETWEEN` query per visible
   * segment, nearest first, until the page is full: hidden items are never read, and a page is
   * full however large the hidden ranges in its way.
   */
  private async readVisible(
    sourceId: string,
    channel: string,
    hidden: [bigint, bigint][],
    read: ReadSpan,
    limit: number,
    nowSeconds: number,
  ): Promise<Item[]> {
    if (hidden.length === 0) {
      const start = read.cursor && { ExclusiveStartKey: resourceKeys.event(sourceId, channel, ...read.cursor) };
      const partition = collectionQuery(
        this.tableName,
        resourceKeys.eventPartition(sourceId, channel),
        SORT_KEY_PREFIX.event,
      );
      return queryUpTo(
        this.client,
        this.unexpired({ ...partition, ScanIndexForward: read.forward, ...start }, nowSeconds),
        limit,
      );
    }
    const segments = visibleSegments(read.lo, read.hi, hidden);
    if (!read.forward) segments.reverse();
    const items: Item[] = [];
    for (const [lo, hi] of segments) {
      if (items.length >= limit) break;
      const input = { ...this.between(sourceId, channel, lo, hi), ScanIndexForward: read.forward };
      items.push(...(await queryUpTo(this.client, this.unexpired(input, nowSeconds), limit - items.length)));
    }
    return items;
  }

  /**
   * The visible events of one channel: `Select: COUNT` over the partition, or over each visible
   * segment. It reads every counted item, so it costs in proportion to what retention keeps.
   */
  private async countVisible(
    sourceId: string,
    channel: string,
    hidden: [bigint, bigint][],
    nowSeconds: number,
  ): Promise<number> {
    if (hidden.length === 0) {
      const pk = resourceKeys.eventPartition(sourceId, channel);
      return countAll(
        this.client,
        this.unexpired(collectionQuery(this.tableName, pk, SORT_KEY_PREFIX.event), nowSeconds),
      );
    }
    const counts = await Promise.all(
      visibleSegments(0n, MAX_KEY, hidden).map(([lo, hi]) =>
        countAll(this.client, this.unexpired(this.between(sourceId, channel, lo, hi), nowSeconds)),
      ),
    );
    return counts.reduce((sum, count) => sum + count, 0);
  }

  /** The strongly consistent Query of one channel's events from key `lo` to key `hi`, inclusive. */
  private between(sourceId: string, channel: string, lo: bigint, hi: bigint) {
    return {
      TableName: this.tableName,
      KeyConditionExpression: "pk = :pk AND sk BETWEEN :lo AND :hi",
      ExpressionAttributeValues: {
        ":pk": resourceKeys.eventPartition(sourceId, channel),
        ":lo": `${SORT_KEY_PREFIX.event}${paddedOf(lo)}`,
        ":hi": `${SORT_KEY_PREFIX.event}${paddedOf(hi)}`,
      },
      ConsistentRead: true,
    } satisfies QueryCommandInput;
  }

  /**
   * `input` without the events past their `expiresAt`: TTL deletes them only within a few days,
   * so reads skip them. Items of an older retention setting keep the `expiresAt` they were written
   * with; with retention off (`maxAgeMs` 0) reads do not filter, and TTL still deletes those.
   */
  private unexpired<T extends QueryCommandInput>(input: T, nowSeconds: number): T {
    if (this.maxAgeMs <= 0) return input;
    return {
      ...input,
      FilterExpression: "attribute_not_exists(#ttl) OR #ttl > :now",
      ExpressionAttributeNames: { ...input.ExpressionAttributeNames, "#ttl": RESOURCES_TABLE.timeToLiveAttribute },
      ExpressionAttributeValues: { ...input.ExpressionAttributeValues, ":now": nowSeconds },
    };
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
      // Age counts from the id's ms (never before nowMs), rounded up to TTL's whole seconds.
      const expiry =
        this.maxAgeMs > 0 ? { [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil((ms + this.maxAgeMs) / 1000) } : {};
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
            // The bytes the workspace's stored totals counted, subtracted when the item is deleted.
            storedBytes: chunk[index]?.size,
            ...expiry,
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

  /**
   * Takes deleted items off their workspace's stored totals (`dynamodb-usage-store.ts`). Events
   * written before items carried `storedBytes` count 0 bytes, as they were never added. Two purges of the
   * same range at once may both subtract: the totals then err low, never blocking a workspace.
   */
  private subtractStored(sourceId: string, items: Item[]): Promise<void> {
    const removed = items.map((item) => ({
      ms: Number(String(item.sk).slice(SORT_KEY_PREFIX.event.length, SORT_KEY_PREFIX.event.length + 15)),
      bytes: Number(item.storedBytes ?? 0),
    }));
    return subtractStoredEvents(this.client, this.tableName, sourceId, removed, this.maxAgeMs);
  }

  private async getSequence(sourceId: string): Promise<Sequence | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.eventSequence(sourceId), ConsistentRead: true }),
    );
    if (!Item) return undefined;
    const marked = Item.channels instanceof Set ? [...(Item.channels as Set<string>)] : [];
    const tombstones = Item.tombstones instanceof Set ? [...(Item.tombstones as Set<string>)] : [];
    return {
      lastMs: Number(Item.lastMs),
      lastN: Number(Item.lastN),
      channels: marked.map((value) => value.slice(CHANNEL_MARK.length)),
      tombstones: tombstones.map(decodeTombstone),
    };
  }
}
