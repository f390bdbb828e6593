/**
 * Recognises the DynamoDB failures the adapters turn into domain errors.
 *
 * Matching is on `error.name` rather than `instanceof`: the SDK defines its exception classes per
 * package, and a bundle can hold two copies of `@aws-sdk/client-dynamodb`, so `instanceof`
 * would miss errors thrown by the other copy.
 */

const nameOf = (error: unknown): unknown => (error as { name?: unknown } | null)?.name;

/** A single conditional write (Put, Update, Delete) whose condition did not hold. */
export const isConditionalCheckFailed = (error: unknown): boolean =>
  nameOf(error) === "ConditionalCheckFailedException";

/**
 * The positions, in the request's `TransactItems`, of the items whose condition failed when a
 * transaction was cancelled. DynamoDB reports one reason per item (`None` for those that would
 * have succeeded). Empty for every other error, including a transaction cancelled only for
 * other reasons (a concurrent transaction, throttling), which callers let propagate.
 */
export function failedConditionIndexes(error: unknown): number[] {
  return cancellationCodes(error).flatMap((code, index) => (code === "ConditionalCheckFailed" ? [index] : []));
}

/** A transaction cancelled because another transaction was writing one of its items at that moment. */
export const isTransactionConflict = (error: unknown): boolean =>
  cancellationCodes(error).includes("TransactionConflict");

/** One code per item of a cancelled transaction, in request order; empty for every other error. */
function cancellationCodes(error: unknown): (string | undefined)[] {
  if (nameOf(error) !== "TransactionCanceledException") return [];
  const reasons = (error as { CancellationReasons?: ({ Code?: string } | undefined)[] }).CancellationReasons ?? [];
  return reasons.map((reason) => reason?.Code);
}
