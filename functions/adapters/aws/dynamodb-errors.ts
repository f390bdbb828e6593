import { hasErrorName } from "./sdk-errors.ts";

/** Recognises the DynamoDB failures the adapters turn into domain errors, by name (`sdk-errors.ts`). */

/** A single conditional write (Put, Update, Delete) whose condition did not hold. */
export const isConditionalCheckFailed = (error: unknown): boolean =>
  hasErrorName(error, "ConditionalCheckFailedException");

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
  if (!hasErrorName(error, "TransactionCanceledException")) return [];
  const reasons = (error as { CancellationReasons?: ({ Code?: string } | undefined)[] }).CancellationReasons ?? [];
  return reasons.map((reason) => reason?.Code);
}
