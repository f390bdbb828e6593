/**
 * The answer to a live stream request refused before anything is streamed, the same in local mode
 * (`functions/local-mode/source-stream-server.ts`) and on AWS (`functions/internal/source-stream-function.ts`): the API's
 * JSON error (`errorResult`: with `x-request-id`, and a Bearer challenge on 401) and `allow: GET` on 405.
 */
import { isDomainError } from "#core/errors";
import type { Logger } from "#core/ports/logger";
import { errorResult, type HttpResult } from "./responses.ts";

export function streamRefusal(error: unknown, requestId: string, log: Logger | undefined): HttpResult {
  const result = errorResult(error, requestId, log);
  if (isDomainError(error) && error.code === "method_not_allowed") result.headers.allow = "GET";
  return result;
}
