/**
 * The translation between API Gateway (HTTP API, payload format 2.0) and a source's HTTP
 * interface: the catch-all routes `ANY /http/{key}` and `ANY /http/{key}/{proxy+}` (and a paused
 * run's `ANY /flow/{run_id}/{secret}/{action}`) deliver the request as an event, and the answer
 * goes back as a Lambda proxy result. Pure, so that recorded events test it.
 */
import type { APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import * as z from "zod";
import type { IncomingHttpRequest } from "#core/http-run-event";
import { answerHeaders } from "#runtime/http-response";
import type { HttpResponseSpec } from "#runtime/protocol";

/** The parts of the API Gateway v2 event a request is made of, whichever route it came by. */
const requestEventShape = {
  rawPath: z.string().startsWith("/"),
  rawQueryString: z.string().default(""),
  headers: z.record(z.string(), z.string()).default({}),
  cookies: z.array(z.string()).optional(),
  body: z.string().optional(),
  isBase64Encoded: z.boolean().default(false),
  requestContext: z.object({
    domainName: z.string().min(1),
    requestId: z.string(),
    http: z.object({ method: z.string().min(1), sourceIp: z.string() }),
  }),
};

/** The parts of the API Gateway v2 event the interface reads. */
export const httpInterfaceEventSchema = z.object({
  ...requestEventShape,
  pathParameters: z.object({ key: z.string().min(1) }),
});
export type HttpInterfaceEvent = z.infer<typeof httpInterfaceEventSchema>;

/**
 * A request to a paused run's URL (`ANY /flow/{run_id}/{secret}/{action}`): the path parameters
 * are checked against #core/workflow-pauses `FLOW_PATH` by the caller, as local mode does.
 */
export const flowEventSchema = z.object({
  ...requestEventShape,
  pathParameters: z.object({ run_id: z.string(), secret: z.string(), action: z.string() }),
});
export type FlowEvent = z.infer<typeof flowEventSchema>;

/** Whether an event came by the flow route (its path parameters say which route matched). */
export const isFlowEvent = (event: unknown): boolean =>
  typeof (event as { pathParameters?: { run_id?: unknown } } | null)?.pathParameters?.run_id === "string";

/** The endpoint key and the request below it (`/http/<key>/a/b?x=1` → key, path `/a/b`). */
export function toIncomingHttpRequest(event: HttpInterfaceEvent): {
  endpointKey: string;
  request: IncomingHttpRequest;
} {
  const endpointKey = event.pathParameters.key;
  const marker = `/http/${endpointKey}`;
  // rawPath is what the client sent, still encoded; a custom domain's base path may precede it.
  const at = event.rawPath.indexOf(marker);
  const rest = at < 0 ? "" : event.rawPath.slice(at + marker.length);
  return { endpointKey, request: requestOf(event, rest.startsWith("/") ? rest : `/${rest}`) };
}

/** The request to a paused run's URL; its path is `/`, as locally (the URL is the whole of it). */
export function toIncomingFlowRequest(event: FlowEvent): IncomingHttpRequest {
  return requestOf(event, "/");
}

function requestOf(event: HttpInterfaceEvent | FlowEvent, path: string): IncomingHttpRequest {
  const headers: Record<string, string> = { ...event.headers };
  // Payload format 2.0 moves cookies out of the headers; the run sees them where a client sent them.
  if (event.cookies?.length) headers.cookie = event.cookies.join("; ");
  const scheme = headers["x-forwarded-proto"] ?? "https";
  const host = headers.host ?? event.requestContext.domainName;
  const query = event.rawQueryString ? `?${event.rawQueryString}` : "";
  return {
    method: event.requestContext.http.method.toUpperCase(),
    path,
    rawQuery: event.rawQueryString,
    headers,
    body: Buffer.from(event.body ?? "", event.isBase64Encoded ? "base64" : "utf8"),
    clientIp: event.requestContext.http.sourceIp,
    url: `${scheme}://${host}${event.rawPath}${query}`,
  };
}

/**
 * The Lambda proxy result of a source's answer. Bytes travel base64-encoded with
 * `isBase64Encoded`; each `Set-Cookie` value goes to `cookies`, where payload format 2.0 wants it.
 * Headers are filtered again here (`answerHeaders`: no framing or hop-by-hop header), since the
 * spec came from a function that ran untrusted code; API Gateway frames the answer itself.
 */
export function toApiGatewayResult(response: HttpResponseSpec): APIGatewayProxyStructuredResultV2 {
  const { headers, cookies } = answerHeaders(response.headers, response.cookies);
  const bodyless = response.status === 204 || response.status === 304;
  const result: APIGatewayProxyStructuredResultV2 = {
    statusCode: response.status,
    headers,
    body: bodyless ? "" : response.body,
    isBase64Encoded: !bodyless && response.bodyEncoding === "base64",
  };
  if (cookies.length > 0) result.cookies = cookies;
  return result;
}
