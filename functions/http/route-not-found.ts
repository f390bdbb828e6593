import type { Context } from "aws-lambda";
import { DomainError } from "#core/errors";
import { errorResult, type HttpEvent, type HttpResult } from "./pipeline.ts";
import { routes } from "./routes.ts";
import { createRouter } from "./routing.ts";

const match = createRouter(routes);

/** 404 for an unknown path, 405 with `Allow` for a known path and another method. */
export function unroutedResult(method: string, path: string, requestId: string): HttpResult {
  const found = match(method, path);
  const result =
    found.kind === "wrong-method"
      ? errorResult(new DomainError("method_not_allowed", `${method} is not allowed on ${path}`), requestId, undefined)
      : errorResult(new DomainError("not_found", `no route for ${method} ${path}`), requestId, undefined);
  if (found.kind === "wrong-method") result.headers.allow = found.allowed.join(", ");
  result.headers["x-request-id"] = requestId;
  return result;
}

/** Lambda behind API Gateway's `$default` route, so unrouted requests get Sluice's error shape. */
export const handler = async (event: HttpEvent, context: Context): Promise<HttpResult> =>
  unroutedResult(
    event.requestContext.http.method,
    event.rawPath,
    event.requestContext.requestId ?? context.awsRequestId,
  );
