/**
 * Whether an AWS SDK error is the exception `name`. Matching is on `error.name` rather than
 * `instanceof`: the SDK defines its exception classes per package, and a bundle can hold two
 * copies of a client, so `instanceof` would miss errors thrown by the other copy.
 */
export const hasErrorName = (error: unknown, name: string): boolean =>
  (error as { name?: unknown } | null)?.name === name;
