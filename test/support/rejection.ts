import { type DomainError, isDomainError } from "#core/errors";

/** The DomainError `promise` rejects with; throws when it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isDomainError(error)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error;
}
