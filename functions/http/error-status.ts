import type { ErrorCode } from "#core/errors";

/** The one table from domain error codes to HTTP statuses. */
export const STATUS_OF: Record<ErrorCode, number> = {
  validation: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  unprocessable: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  internal: 500,
  unavailable: 503,
};
