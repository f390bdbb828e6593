import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import { type Clock, systemClock } from "#core/ports/clock";
import type { DailyUsage, StoredUsage, UsageStore } from "#core/ports/usage-store";
import { isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { queryAll } from "./dynamodb-paging.ts";
import { resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export interface DynamoDbUsageStoreOptions {
  /**
   * How long events are kept (`SLUICE_EVENT_RETENTION_DAYS`; 0 forever): stored totals count the
   * days of appends inside it, since DynamoDB's TTL removes expired events without telling anyone.
   * @default 0
   */
  readonly eventMaxAgeMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
}

/** What the event store removed: each event's id ms and its `size` (UTF-8 bytes of its event and meta JSON). */
export interface RemovedEvent {
  ms: number;
  bytes: number;
}

/**
 * Subtracts removed events from what their source's workspace keeps stored, on the day buckets
 * they were counted in. Called by `DynamoDbEventStore` where it deletes event items (the purge of
 * a deleted range, deleting every event of a source); a source whose owner was never recorded
 * (nothing counted) is skipped. A bucket that expired meanwhile comes back with its negative
 * amount and the same expiry, outside the window read by `getStored`.
 */
export async function subtractStoredEvents(
  client: DynamoDBDocumentClient,
  tableName: string,
  sourceId: string,
  removed: readonly RemovedEvent[],
  eventMaxAgeMs: number,
): Promise<void> {
  if (removed.length === 0) return;
  const { Item } = await client.send(new GetCommand({ TableName: tableName, Key: resourceKeys.storedOwner(sourceId) }));
  if (typeof Item?.ownerId !== "string") return;
  const byDay = new Map<string, StoredUsage>();
  for (const { ms, bytes } of removed) {
    const day = dayOf(ms);
    const total = byDay.get(day) ?? { events: 0, bytes: 0 };
    total.events += 1;
    total.bytes += bytes;
    byDay.set(day, total);
  }
  await Promise.all(
    [...byDay].map(([day, total]) =>
      addToBucket(
        client,
        tableName,
        Item.ownerId as string,
        day,
        { events: -total.events, bytes: -total.bytes },
        eventMaxAgeMs,
      ),
    ),
  );
}

function addToBucket(
  client: DynamoDBDocumentClient,
  tableName: string,
  ownerId: string,
  day: string,
  delta: StoredUsage,
  eventMaxAgeMs: number,
) {
  // A bucket expires when the last event it counts does: the end of its day plus the retention.
  const expiry = eventMaxAgeMs > 0 ? Math.ceil((Date.parse(`${day}T00:00:00Z`) + DAY_MS + eventMaxAgeMs) / 1000) : 0;
  return client.send(
    new UpdateCommand({
      TableName: tableName,
      Key: resourceKeys.storedUsage(ownerId, day),
      UpdateExpression: `SET #type = :type${expiry ? ", #ttl = if_not_exists(#ttl, :expiry)" : ""} ADD events :e, bytes :b`,
      ExpressionAttributeNames: { "#type": "type", ...(expiry ? { "#ttl": RESOURCES_TABLE.timeToLiveAttribute } : {}) },
      ExpressionAttributeValues: {
        ":type": "storedUsage",
        ":e": delta.events,
        ":b": delta.bytes,
        ...(expiry ? { ":expiry": expiry } : {}),
      },
    }),
  );
}

/**
 * `UsageStore` on the DynamoDB resources table.
 *
 * - Daily usage: one item per owner and UTC day whose counters grow with `ADD`, so concurrent
 *   invocations never lose an increment and no read precedes a write.
 * - Stored totals: one bucket item per workspace and UTC day of append (`ADD`), which expires with
 *   the events it counts; `getStored` sums the buckets inside the retention (one Query). Removals
 *   are subtracted from the bucket of each event's day by the event store
 *   ({@link subtractStoredEvents}). Expiry is thus counted to the day, not to the event.
 * - Window counters: one item per key and window, `ADD` with `UPDATED_NEW`, expired by TTL.
 */
export class DynamoDbUsageStore implements UsageStore {
  private readonly eventMaxAgeMs: number;
  private readonly clock: Clock;
  /** Sources whose owner item this container wrote already. */
  private readonly recordedSources = new Set<string>();

  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    options: DynamoDbUsageStoreOptions = {},
  ) {
    this.eventMaxAgeMs = options.eventMaxAgeMs ?? 0;
    this.clock = options.clock ?? systemClock;
  }

  async addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void> {
    // All three counters are added even when a delta is 0, so the item always holds all of them
    // and one expression serves every call.
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: resourceKeys.usage(ownerId, day),
        UpdateExpression: "SET #type = :type ADD invocations :i, computeTimeMs :c, credits :r",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: {
          ":type": "usage",
          ":i": delta.invocations ?? 0,
          ":c": delta.computeTimeMs ?? 0,
          ":r": delta.credits ?? 0,
        },
      }),
    );
  }

  async getUsage(ownerId: string, day: string): Promise<DailyUsage> {
    // Strongly consistent so a quota check sees the increments written just before it.
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.usage(ownerId, day), ConsistentRead: true }),
    );
    return {
      invocations: Number(Item?.invocations ?? 0),
      computeTimeMs: Number(Item?.computeTimeMs ?? 0),
      credits: Number(Item?.credits ?? 0),
    };
  }

  async addStored(ownerId: string, sourceId: string, atMs: number, delta: StoredUsage): Promise<void> {
    await Promise.all([
      this.recordOwner(ownerId, sourceId),
      addToBucket(this.client, this.tableName, ownerId, dayOf(atMs), delta, this.eventMaxAgeMs),
    ]);
  }

  async getStored(ownerId: string): Promise<StoredUsage> {
    const { pk } = resourceKeys.storedUsage(ownerId, "");
    const first =
      this.eventMaxAgeMs > 0 ? `${SORT_KEY_PREFIX.storedUsage}${dayOf(this.clock.nowMs() - this.eventMaxAgeMs)}` : "";
    const buckets = await queryAll(this.client, {
      TableName: this.tableName,
      KeyConditionExpression: first
        ? "pk = :pk AND sk BETWEEN :first AND :last"
        : "pk = :pk AND begins_with(sk, :prefix)",
      ExpressionAttributeValues: first
        ? { ":pk": pk, ":first": first, ":last": `${SORT_KEY_PREFIX.storedUsage}\uffff` }
        : { ":pk": pk, ":prefix": SORT_KEY_PREFIX.storedUsage },
      ProjectionExpression: "events, bytes",
      ConsistentRead: true,
    });
    const total = { events: 0, bytes: 0 };
    for (const bucket of buckets) {
      total.events += Number(bucket.events ?? 0);
      total.bytes += Number(bucket.bytes ?? 0);
    }
    return total;
  }

  async countInWindow(key: string, windowStartMs: number, windowMs: number): Promise<number> {
    const { Attributes } = await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: resourceKeys.usageWindow(key, windowStartMs),
        UpdateExpression: "SET #type = :type, #ttl = :expiry ADD #count :one",
        ExpressionAttributeNames: { "#type": "type", "#ttl": RESOURCES_TABLE.timeToLiveAttribute, "#count": "count" },
        ExpressionAttributeValues: {
          ":type": "usageWindow",
          ":one": 1,
          // Kept a little past its window; TTL may take longer still, and nothing reads an old window.
          ":expiry": Math.ceil((windowStartMs + windowMs) / 1000) + 60,
        },
        ReturnValues: "UPDATED_NEW",
      }),
    );
    return Number(Attributes?.count ?? 1);
  }

  /** Writes the source's owner item once per container (a retry of an existing one is a no-op). */
  private async recordOwner(ownerId: string, sourceId: string): Promise<void> {
    if (this.recordedSources.has(sourceId)) return;
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...resourceKeys.storedOwner(sourceId), type: "storedOwner", ownerId },
          ConditionExpression: "attribute_not_exists(pk)",
        }),
      );
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
    }
    this.recordedSources.add(sourceId);
  }
}
