import { TransactionCanceledException } from "@aws-sdk/client-dynamodb";

/**
 * What the DynamoDB adapters' request-shape tests expect and answer: the items of a
 * `TransactWriteItems` as the adapters build them, and a transaction cancelled as DynamoDB reports it.
 */

type Values = Record<string, unknown>;

/** The `Put` and `Delete` entries of a transaction on `tableName`, conditions omitted when absent. */
export function transactionItems(tableName: string) {
  const condition = (ConditionExpression?: string, values?: Values) => ({
    ...(ConditionExpression ? { ConditionExpression } : {}),
    ...(values ? { ExpressionAttributeValues: values } : {}),
  });
  return {
    put: (Item: Values, ConditionExpression?: string, values?: Values) => ({
      Put: { TableName: tableName, Item, ...condition(ConditionExpression, values) },
    }),
    del: (Key: Record<string, string>, ConditionExpression?: string, values?: Values) => ({
      Delete: { TableName: tableName, Key, ...condition(ConditionExpression, values) },
    }),
  };
}

/** A cancelled transaction: one reason code per item, in request order. */
export function cancelled(codes: string[]) {
  return new TransactionCanceledException({
    message: "Transaction cancelled",
    $metadata: {},
    CancellationReasons: codes.map((Code) => ({ Code })),
  });
}

/** A transaction of `length` items cancelled by the condition of item `index` alone. */
export const failedAt = (index: number, length: number) =>
  cancelled(Array.from({ length }, (_, i) => (i === index ? "ConditionalCheckFailed" : "None")));
