/**
 * `GET /sources/{id}/sse` and `GET /workflows/{workflow_id}/sse` on the HTTP API. API Gateway HTTP APIs buffer a function's answer (and
 * give up after 30 s), so they cannot carry a stream; the stream is served by the stream function's
 * URL (`source-stream-function.ts`). This route answers `307 Temporary Redirect` to the same path and
 * query there, so the spec's stream address works with clients that follow redirects.
 *
 * A client resends `Authorization` to another host only when told to (`curl --location-trusted`;
 * `curl -L` and `fetch` drop it, and then get a 401 from the stream function), so clients should use
 * the stack's `StreamUrl` output directly. Nothing is checked here: the stream function checks the
 * key and the source or workflow.
 */
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { loadAwsComputeConfig } from "#config/aws-compute-env";
import type { HttpResult } from "#http/responses";
import { jsonResult } from "#http/responses";

/** The redirect to `<streamUrl>/sources/{id}/sse?<query>` (or `/workflows/{workflow_id}/sse`, by the route's parameter). */
export function sseRedirect(
  event: Pick<APIGatewayProxyEventV2, "pathParameters" | "rawQueryString" | "requestContext">,
  streamUrl: string,
): HttpResult {
  const workflowId = event.pathParameters?.workflow_id;
  const path =
    workflowId === undefined
      ? `/sources/${encodeURIComponent(event.pathParameters?.id ?? "")}/sse`
      : `/workflows/${encodeURIComponent(workflowId)}/sse`;
  const query = event.rawQueryString ? `?${event.rawQueryString}` : "";
  const location = `${streamUrl.replace(/\/+$/, "")}${path}${query}`;
  return jsonResult(
    307,
    {
      location,
      message:
        "Streams are served at the stack's StreamUrl. Connect there with Authorization: Bearer <key>, or follow this redirect resending it (curl --location-trusted).",
    },
    { location, "cache-control": "no-store", "x-request-id": event.requestContext.requestId },
  );
}

let streamUrl: string | undefined;

export const handler = async (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
  streamUrl ??= loadAwsComputeConfig().stream.url;
  if (streamUrl === undefined) throw new Error("SLUICE_STREAM_URL is not set: the stack sets it on this function");
  return sseRedirect(event, streamUrl);
};
