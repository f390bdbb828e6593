import { type DomainError, type FieldIssue, isDomainError } from "#core/errors";

/** The DomainError `promise` rejects with; throws when it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isDomainError(error)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error;
}

/** The issues of the `validation` DomainError `fn` throws; throws when it returns or throws anything else. */
export function validationIssues(fn: () => unknown): FieldIssue[] {
  try {
    fn();
  } catch (error) {
    if (isDomainError(error) && error.code === "validation") return error.issues ?? [];
    throw new Error(`expected a validation DomainError, got ${String(error)}`);
  }
  throw new Error("expected a validation DomainError, got none");
}
