import {
  BatchWriteCommand,
  type DynamoDBDocumentClient,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteCommand,
} from "@aws-sdk/lib-dynamodb";
import type { Page, PageQuery } from "#core/pagination";

/**
 * Requests shared by the DynamoDB adapters. A Query result stops at 1 MB (or at `Limit`), so every
 * read of a collection follows `LastEvaluatedKey`; batch requests leave entries unprocessed under
 * throttling, so they are sent again until done.
 */

export type Item = Record<string, unknown>;

/** BatchWriteItem takes 25 requests. */
const BATCH_WRITE_LIMIT = 25;
const BATCH_WRITE_ATTEMPTS = 8;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The strongly consistent Query of one collection: partition `pk`, sort keys that start with `skPrefix`. */
export function collectionQuery(tableName: string, pk: string, skPrefix: string) {
  return {
    TableName: tableName,
    KeyConditionExpression: "pk = :pk AND begins_with(sk, :prefix)",
    ExpressionAttributeValues: { ":pk": pk, ":prefix": skPrefix },
    ConsistentRead: true,
  } satisfies QueryCommandInput;
}

/**
 * Writes `items` in one transaction, each only if its key is new: any collision cancels the whole
 * write instead of silently overwriting (`failedConditionIndexes` of `dynamodb-errors.ts` says
 * which items collided).
 */
export async function putAllNew(client: DynamoDBDocumentClient, tableName: string, items: Item[]): Promise<void> {
  await client.send(
    new TransactWriteCommand({
      TransactItems: items.map((Item) => ({
        Put: { TableName: tableName, Item, ConditionExpression: "attribute_not_exists(pk)" },
      })),
    }),
  );
}

/** Every page of a query, from `input.ExclusiveStartKey` (if any) to the end of the collection. */
async function* queryPages(
  client: DynamoDBDocumentClient,
  input: QueryCommandInput,
): AsyncGenerator<QueryCommandOutput> {
  let startKey = input.ExclusiveStartKey;
  do {
    const out = await client.send(new QueryCommand({ ...input, ExclusiveStartKey: startKey }));
    yield out;
    startKey = out.LastEvaluatedKey;
  } while (startKey);
}

/** Every item a query matches. */
export async function queryAll(client: DynamoDBDocumentClient, input: QueryCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  for await (const page of queryPages(client, input)) items.push(...(page.Items ?? []));
  return items;
}

/** How many items a query matches (`Select: COUNT`, all pages summed). */
export async function countAll(client: DynamoDBDocumentClient, input: QueryCommandInput): Promise<number> {
  let total = 0;
  for await (const page of queryPages(client, { ...input, Select: "COUNT" })) total += page.Count ?? 0;
  return total;
}

/** The first `limit` items a query matches, in query order; each request asks only for those still missing. */
export async function queryUpTo(
  client: DynamoDBDocumentClient,
  input: QueryCommandInput,
  limit: number,
): Promise<Item[]> {
  const items: Item[] = [];
  let startKey = input.ExclusiveStartKey;
  do {
    const out = await client.send(
      new QueryCommand({ ...input, Limit: limit - items.length, ExclusiveStartKey: startKey }),
    );
    items.push(...(out.Items ?? []));
    startKey = out.LastEvaluatedKey;
  } while (startKey && items.length < limit);
  return items;
}

/**
 * Sends a batch (`BatchGetItem`, `BatchWriteItem`) until DynamoDB has processed every entry:
 * `send` returns the entries left unprocessed. Those mean throttling, and asking again at once
 * would be throttled again, so each retry waits twice as long (50 ms, 100 ms, ...); after
 * `attempts` requests it fails.
 */
export async function sendUntilProcessed<T>(
  operation: string,
  entries: T[],
  attempts: number,
  send: (pending: T[]) => Promise<T[]>,
): Promise<void> {
  let pending = entries;
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > attempts) throw new Error(`${operation} left ${pending.length} entries unprocessed`);
    if (attempt > 1) await sleep(25 * 2 ** (attempt - 1));
    pending = await send(pending);
  }
}

/** A `FilterExpression` with the names and values it uses (values must not be `:pk` or `:prefix`). */
export interface QueryFilter {
  FilterExpression: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
}

/**
 * One page of a collection newest first, with `slicePage` semantics (docs/table-design.md,
 * "Pagination"): the sort keys are `<prefix><id>`, the cursor an id. With a `filter`, items it
 * drops are neither returned nor counted.
 */
export async function newestFirstPage(
  client: DynamoDBDocumentClient,
  tableName: string,
  pk: string,
  prefix: string,
  page: PageQuery,
  filter?: QueryFilter,
): Promise<Page<Item>> {
  const cursor = page.after ?? page.before;
  const forward = page.after === undefined && page.before !== undefined;
  const unfiltered = collectionQuery(tableName, pk, prefix);
  const collection: QueryCommandInput = filter
    ? {
        ...unfiltered,
        ...filter,
        ExpressionAttributeValues: { ...unfiltered.ExpressionAttributeValues, ...filter.ExpressionAttributeValues },
      }
    : unfiltered;
  const start = cursor === undefined ? {} : { ExclusiveStartKey: { pk, sk: `${prefix}${cursor}` } };
  const [items, totalCount] = await Promise.all([
    queryUpTo(client, { ...collection, ScanIndexForward: forward, ...start }, page.limit),
    countAll(client, collection),
  ]);
  if (forward) items.reverse();
  return { items, totalCount };
}

/**
 * Deletes every item a key-only query (`ProjectionExpression: "pk, sk"`, plus what `onDeleted`
 * reads) matches, page by page, in `BatchWriteItem`s of 25. `onDeleted` gets each page's items
 * once they are deleted.
 */
export async function deleteAllMatching(
  client: DynamoDBDocumentClient,
  tableName: string,
  keysQuery: QueryCommandInput,
  onDeleted?: (items: Item[]) => Promise<void>,
): Promise<void> {
  for await (const page of queryPages(client, keysQuery)) {
    const items = page.Items ?? [];
    const keys = items.map((item) => ({ pk: item.pk, sk: item.sk }));
    for (let start = 0; start < keys.length; start += BATCH_WRITE_LIMIT) {
      const deletes = keys.slice(start, start + BATCH_WRITE_LIMIT).map((Key) => ({ DeleteRequest: { Key } }));
      await sendUntilProcessed("BatchWriteItem", deletes, BATCH_WRITE_ATTEMPTS, async (pending) => {
        const out = await client.send(new BatchWriteCommand({ RequestItems: { [tableName]: pending } }));
        return (out.UnprocessedItems?.[tableName] ?? []) as typeof pending;
      });
    }
    if (onDeleted && items.length > 0) await onDeleted(items);
  }
}
