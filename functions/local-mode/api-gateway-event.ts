import type { IncomingMessage } from "node:http";
import type { HttpEvent } from "#http/pipeline";

/**
 * Builds the API Gateway HTTP API (payload 2.0) event that API Gateway would hand the route's
 * Lambda for this request, so local mode runs the handlers exactly as deployed: headers lower
 * case with repeated values joined by commas, repeated query keys joined by commas, the body as
 * text.
 */
export function toApiGatewayEvent(
  request: IncomingMessage,
  url: URL,
  body: Buffer,
  route: { routeKey: string; pathParameters?: Record<string, string> },
  requestId: string,
  nowMs: number,
): HttpEvent {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(",") : value;
  }
  // A Map, so names such as `__proto__` or `toString` are plain keys and not the object's own members.
  const joined = new Map<string, string>();
  for (const [name, value] of url.searchParams) {
    const before = joined.get(name);
    joined.set(name, before === undefined ? value : `${before},${value}`);
  }
  const query: Record<string, string> = Object.fromEntries(joined);
  const method = request.method ?? "GET";
  return {
    version: "2.0",
    routeKey: route.routeKey,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers,
    queryStringParameters: joined.size > 0 ? query : undefined,
    pathParameters: route.pathParameters,
    body: body.length > 0 ? body.toString("utf8") : undefined,
    isBase64Encoded: false,
    requestContext: {
      accountId: "local",
      apiId: "local",
      domainName: headers.host ?? "127.0.0.1",
      domainPrefix: "local",
      http: {
        method,
        path: url.pathname,
        protocol: `HTTP/${request.httpVersion}`,
        sourceIp: request.socket.remoteAddress ?? "127.0.0.1",
        userAgent: headers["user-agent"] ?? "",
      },
      requestId,
      routeKey: route.routeKey,
      stage: "$default",
      time: new Date(nowMs).toUTCString(),
      timeEpoch: nowMs,
    },
  };
}
