import { type DynamoDBDocumentClient, TransactWriteCommand } from "@aws-sdk/lib-dynamodb";
import { failedConditionIndexes, isTransactionConflict } from "./dynamodb-errors.ts";
import { type Item, sleep } from "./dynamodb-paging.ts";

/**
 * Transactions of the stores that keep a record and its copies in step (sources, subscriptions):
 * one item each, conditioned or not, and the retry of a transaction lost to a concurrent writer.
 */

export type Key = { pk: string; sk: string };
export type TransactItem = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]["TransactItems"]>[number];

/** Transactions lost to a concurrent writer are retried this often before giving up. */
const WRITE_ATTEMPTS = 8;
/** Jittered, growing pause before another attempt, so racing writers spread out. */
const backoff = (attempt: number) => sleep(Math.random() * 10 * 2 ** Math.min(attempt, 6));

/** The condition members of a write, omitted entirely when it has none. */
function conditionOf(condition: string | undefined, values: Item | undefined) {
  if (condition === undefined) return {};
  return values === undefined
    ? { ConditionExpression: condition }
    : { ConditionExpression: condition, ExpressionAttributeValues: values };
}

export function transactPut(tableName: string, Item: Item, condition?: string, values?: Item): TransactItem {
  return { Put: { TableName: tableName, Item, ...conditionOf(condition, values) } };
}

export function transactDelete(tableName: string, Key: Key, condition?: string, values?: Item): TransactItem {
  return { Delete: { TableName: tableName, Key, ...conditionOf(condition, values) } };
}

export async function transactWrite(client: DynamoDBDocumentClient, TransactItems: TransactItem[]): Promise<void> {
  await client.send(new TransactWriteCommand({ TransactItems }));
}

/**
 * After failed attempt number `attempt`: when `retryable` and attempts are left, pauses (jittered
 * backoff) and returns true; else false, and the caller gives up with the error.
 */
export async function pauseBeforeRetry(retryable: boolean, attempt: number): Promise<boolean> {
  if (attempt >= WRITE_ATTEMPTS || !retryable) return false;
  await backoff(attempt);
  return true;
}

/** A read-then-write transaction lost: its first item's condition failed, or another transaction held an item. */
export const lostToConcurrentWriter = (error: unknown): boolean =>
  failedConditionIndexes(error).includes(0) || isTransactionConflict(error);
