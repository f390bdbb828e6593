import type { Context } from "aws-lambda";
import { DomainError } from "#core/errors";
import type { HttpEvent } from "./pipeline.ts";
import { errorResult, type HttpResult } from "./responses.ts";
import { routes } from "./routes.ts";
import { createRouter } from "./routing.ts";

const match = createRouter(routes);

/**
 * 404 for an unknown path, 405 with `Allow` for a known path and another method. On AWS a known
 * path with a trailing slash also lands here (HTTP API route keys cannot end in `/`): it gets a
 * 308 to the same path without the slash, which keeps the method and body.
 */
export function unroutedResult(method: string, path: string, requestId: string, query = ""): HttpResult {
  const found = match(method, path);
  if (found.kind === "found") {
    const location = `${path.replace(/\/+$/, "")}${query ? `?${query}` : ""}`;
    return { statusCode: 308, headers: { location, "x-request-id": requestId }, body: "" };
  }
  const result =
    found.kind === "wrong-method"
      ? errorResult(new DomainError("method_not_allowed", `${method} is not allowed on ${path}`), requestId, undefined)
      : errorResult(new DomainError("not_found", `no route for ${method} ${path}`), requestId, undefined);
  if (found.kind === "wrong-method") result.headers.allow = found.allowed.join(", ");
  return result;
}

/** Lambda behind API Gateway's `$default` route, so unrouted requests get Sluice's error shape. */
export const handler = async (event: HttpEvent, context: Context): Promise<HttpResult> =>
  unroutedResult(
    event.requestContext.http.method,
    event.rawPath,
    event.requestContext.requestId ?? context.awsRequestId,
  );
