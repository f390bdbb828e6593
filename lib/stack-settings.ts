import { RetentionDays } from "aws-cdk-lib/aws-logs";

/**
 * The service stack's numeric `-c` context values (README, "Settings"; docs/aws.md, "Logs and
 * concurrency"): their defaults, and how `bin/app.ts` reads them. A bad value fails `cdk synth`
 * with a message naming the value and the rule, before anything is deployed.
 */

/** `-c logRetentionDays`: how long every log group of the stack keeps events. */
export const LOG_RETENTION_DEFAULT_DAYS = 30;
/** `-c maxStreams`: reserved concurrency of the stream function, i.e. open live streams at most. */
export const MAX_STREAMS_DEFAULT = 50;
/** `-c maxDeliveryConcurrency`: concurrent deliverer invocations per delivery queue (SQS's `MaximumConcurrency`). */
export const MAX_DELIVERY_CONCURRENCY_DEFAULT = 10;

/** The retentions CloudWatch Logs accepts, "never expire" left out: every group has one. */
const RETENTIONS = (Object.values(RetentionDays).filter((value) => typeof value === "number") as number[])
  .filter((days) => days !== RetentionDays.INFINITE)
  .sort((a, b) => a - b);

/** A whole number from a context value (`-c name=12` gives the string "12"), or undefined when unset. */
export function intContext(value: unknown, name: string, bounds: { min: number; max: number }): number | undefined {
  if (value === undefined) return undefined;
  const number =
    typeof value === "number" ? value : typeof value === "string" && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(number) || number < bounds.min || number > bounds.max) {
    throw new Error(
      `Invalid ${name} ${JSON.stringify(value)}: use a whole number from ${bounds.min} to ${bounds.max}.`,
    );
  }
  return number;
}

/** The log retention of `-c logRetentionDays`: one of the values CloudWatch Logs accepts. */
export function logRetentionOf(value: unknown): RetentionDays | undefined {
  const days = intContext(value, "logRetentionDays", { min: 1, max: RETENTIONS.at(-1)! });
  if (days === undefined) return undefined;
  if (!RETENTIONS.includes(days)) {
    throw new Error(`Invalid logRetentionDays ${days}: CloudWatch Logs keeps events ${RETENTIONS.join(", ")} days.`);
  }
  return days as RetentionDays;
}
