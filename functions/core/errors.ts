/**
 * Domain errors carry a stable `code`. The HTTP layer maps codes to statuses in one table
 * (`functions/http/error-status.ts`). Match on `code`, never only on `instanceof`: the runtime
 * layer and every Lambda are bundled apart, so two copies of this class can meet.
 */
export type ErrorCode =
  | "unauthorized"
  /** A capability URL (a File Store file's) that is forged, expired, or for another method. */
  | "forbidden"
  | "not_found"
  | "validation"
  | "conflict"
  /** The request is well formed but contradicts an earlier one (an `Idempotency-Key` reused with another body). */
  | "unprocessable"
  | "payload_too_large"
  | "unsupported_media_type"
  | "method_not_allowed"
  /** The server cannot store anything now (its disk is full or read-only): try again later. */
  | "unavailable"
  | "internal";

/** One problem with one input field, e.g. `{ field: "query.limit", message: "must be at most 100" }`. */
export interface FieldIssue {
  field: string;
  message: string;
}

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly issues: FieldIssue[] | undefined;

  constructor(code: ErrorCode, message: string, issues?: FieldIssue[]) {
    super(message);
    this.name = "DomainError";
    this.code = code;
    this.issues = issues;
  }
}

export const notFound = (what: string) => new DomainError("not_found", `${what} not found`);

export const unauthorized = (message = "a valid API key is required: send Authorization: Bearer <key>") =>
  new DomainError("unauthorized", message);

export const conflict = (message: string) => new DomainError("conflict", message);

export function invalid(field: string, message: string): DomainError {
  return new DomainError("validation", `${field}: ${message}`, [{ field, message }]);
}

export function isDomainError(error: unknown): error is DomainError {
  return (
    typeof error === "object" &&
    error !== null &&
    typeof (error as { code?: unknown }).code === "string" &&
    (error as { name?: unknown }).name === "DomainError"
  );
}
