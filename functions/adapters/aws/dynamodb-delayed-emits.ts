/**
 * The rows of `DelayedEmitStore` on the DynamoDB resources table (docs/table-design.md "Delayed
 * emits"): per delayed emit a small index item `DLY#<source>` / `IN#<$in id>` (its due time) and
 * its body `BODY#<$in id>` (channel, event, meta). Counting a source's pending emits and cancelling a
 * range of `$in` ids read only the index items (1,000 of them are well under one Query page), never
 * the bodies of up to 256 KiB each. Both items expire by TTL a day after the emit's time, so a row
 * whose schedule never fired does not stay. `SchedulerDelayedEmits` adds the schedules.
 */
import { BatchWriteCommand, type DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import { parseEventId } from "#core/event-ids";
import type { DelayedEmit, DelayedEmitStore } from "#core/ports/delayed-emits";
import type { EmitMeta, Json } from "#runtime/protocol";
import { collectionQuery, countAll, type Item, queryAll, sendUntilProcessed } from "./dynamodb-paging.ts";
import { eventSortKey, resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

/** How long past its time a row is kept for DynamoDB's TTL to remove, if nothing delivered it. */
export const DELAYED_EMIT_ROW_GRACE_MS = 24 * 60 * 60 * 1000;
const BATCH_WRITE_LIMIT = 25;
const BATCH_WRITE_ATTEMPTS = 8;
const INDEX = SORT_KEY_PREFIX.delayedEmit;

/** `[ms, n]` of a `$in` id; the event store made it, so a malformed one is a bug. */
function idParts(inEventId: string): [number, number] {
  const parts = parseEventId(inEventId);
  if (!parts) throw new Error(`not an event id: ${JSON.stringify(inEventId)}`);
  return parts;
}

export class DynamoDbDelayedEmits implements DelayedEmitStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async add(entries: readonly DelayedEmit[]): Promise<void> {
    const puts = entries.flatMap((entry) => {
      const [ms, n] = idParts(entry.inEventId);
      const expiry = {
        [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil((entry.dueMs + DELAYED_EMIT_ROW_GRACE_MS) / 1000),
      };
      return [
        {
          ...resourceKeys.delayedEmit(entry.sourceId, ms, n),
          inEventId: entry.inEventId,
          dueMs: entry.dueMs,
          ...expiry,
        },
        {
          ...resourceKeys.delayedEmitBody(entry.sourceId, ms, n),
          sourceId: entry.sourceId,
          inEventId: entry.inEventId,
          dueMs: entry.dueMs,
          channel: entry.channel,
          event: JSON.stringify(entry.event),
          meta: JSON.stringify(entry.meta),
          ...expiry,
        },
      ];
    });
    // Not one transaction: an index item left without its body (a failed batch) delivers nothing
    // and expires; a body without its index item is delivered but not counted.
    await this.batchWrite(puts.map((Item) => ({ PutRequest: { Item } })));
  }

  async countPending(sourceId: string): Promise<number> {
    return countAll(this.client, collectionQuery(this.tableName, resourceKeys.delayedEmits(sourceId), INDEX));
  }

  async get(sourceId: string, inEventId: string): Promise<DelayedEmit | undefined> {
    const parts = parseEventId(inEventId);
    if (!parts) return undefined;
    const out = await this.client.send(
      new GetCommand({
        TableName: this.tableName,
        Key: resourceKeys.delayedEmitBody(sourceId, ...parts),
        ConsistentRead: true,
      }),
    );
    const item = out.Item;
    if (!item) return undefined;
    return {
      sourceId,
      inEventId,
      dueMs: Number(item.dueMs),
      channel: String(item.channel),
      event: JSON.parse(String(item.event)) as Json,
      meta: JSON.parse(String(item.meta)) as EmitMeta,
    };
  }

  async remove(sourceId: string, inEventId: string): Promise<void> {
    await this.deleteRows(sourceId, [inEventId]);
  }

  async removeRange(sourceId: string, fromId?: string, toId?: string): Promise<string[]> {
    const from = fromId === undefined ? undefined : parseEventId(fromId);
    const to = toId === undefined ? undefined : parseEventId(toId);
    // `~` sorts after every digit and `-`: the end of the collection.
    const lower = from ? `${INDEX}${eventSortKey(...from)}` : INDEX;
    const upper = to ? `${INDEX}${eventSortKey(...to)}` : `${INDEX}~`;
    const items = await queryAll(this.client, {
      TableName: this.tableName,
      KeyConditionExpression: "pk = :pk AND sk BETWEEN :lower AND :upper",
      ExpressionAttributeValues: { ":pk": resourceKeys.delayedEmits(sourceId), ":lower": lower, ":upper": upper },
      ProjectionExpression: "inEventId",
      ConsistentRead: true,
    });
    const ids = items.map((item: Item) => String(item.inEventId));
    await this.deleteRows(sourceId, ids);
    return ids;
  }

  private async deleteRows(sourceId: string, inEventIds: readonly string[]): Promise<void> {
    const keys = inEventIds.flatMap((id) => {
      const parts = parseEventId(id);
      return parts
        ? [resourceKeys.delayedEmit(sourceId, ...parts), resourceKeys.delayedEmitBody(sourceId, ...parts)]
        : [];
    });
    await this.batchWrite(keys.map((Key) => ({ DeleteRequest: { Key } })));
  }

  private async batchWrite(requests: readonly Record<string, unknown>[]): Promise<void> {
    for (let start = 0; start < requests.length; start += BATCH_WRITE_LIMIT) {
      const chunk = requests.slice(start, start + BATCH_WRITE_LIMIT);
      await sendUntilProcessed("BatchWriteItem", chunk, BATCH_WRITE_ATTEMPTS, async (pending) => {
        const out = await this.client.send(new BatchWriteCommand({ RequestItems: { [this.tableName]: pending } }));
        return (out.UnprocessedItems?.[this.tableName] ?? []) as typeof pending;
      });
    }
  }
}
