/**
 * The function behind the catch-all routes `ANY /http/{key}` and `ANY /http/{key}/{proxy+}`: every
 * request to a source's HTTP endpoint. It finds the source by the endpoint key and answers as
 * `receiveHttpRequest` decides: at once (the run is queued) or, for a custom response, with the
 * run's `respond(...)`, which on AWS arrives when the run ends.
 *
 * It also answers `ANY /flow/{run_id}/{secret}/{action}`, a paused run's resume and cancel URLs
 * (`receiveFlowRequest`): like an endpoint, a URL anyone may call, whose secret is the proof.
 */
import type { APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { notFound } from "#core/errors";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { Deps } from "#core/ports/deps";
import { receiveHttpRequest } from "#core/source-endpoint";
import { FLOW_PATH, receiveFlowRequest } from "#core/workflow-pauses";
import { ENDPOINT_LOG_PATH, FLOW_LOG_PATH, logRequest, type RequestLine } from "#http/request-log";
import { errorResult } from "#http/responses";
import type { HttpResponseSpec } from "#runtime/protocol";
import {
  flowEventSchema,
  httpInterfaceEventSchema,
  isFlowEvent,
  toApiGatewayResult,
  toIncomingFlowRequest,
  toIncomingHttpRequest,
} from "./api-gateway-http.ts";
import { awsDepsLoader, SOURCE_RUNNING_PARTS } from "./internal-handler.ts";

/**
 * What a custom-response run leaves of the function's remaining time: enough to store what the run
 * emitted and answer, before Lambda ends the function (and API Gateway its 30 s) with no answer.
 */
export const ANSWER_MARGIN_MS = 3_000;

/** The part of Lambda's context the function reads. */
interface EndpointContext {
  awsRequestId?: string;
  getRemainingTimeInMillis?: () => number;
}

/** The function's handler on the dependencies `loadDeps` gives (the AWS ones in the stack). */
export function httpInterfaceHandler(loadDeps: () => Promise<Deps>) {
  return (event: unknown, context?: EndpointContext) => answer(loadDeps, event, context);
}

/**
 * It runs sources (and queues their runs), as the stack grants (lib/constructs/source-compute.ts),
 * and reads and takes paused runs (their URLs): the pauses part, without schedule settings, as a
 * run it answers for never pauses (a custom response's run cannot).
 */
export const handler = httpInterfaceHandler(
  awsDepsLoader({
    ...SOURCE_RUNNING_PARTS,
    runs: () => import("#adapters/aws/parts/runs"),
    pauses: () => import("#adapters/aws/parts/pauses"),
  }),
);

/** A request to a paused run's URL; a path that is no such URL is answered as no route would be. */
async function answerFlow(
  deps: Deps,
  event: unknown,
): Promise<{ request: IncomingHttpRequest; spec?: HttpResponseSpec }> {
  const parsed = flowEventSchema.parse(event);
  const request = toIncomingFlowRequest(parsed);
  const { run_id: runId, secret, action } = parsed.pathParameters;
  if (!FLOW_PATH.test(`/flow/${runId}/${secret}/${action}`)) return { request };
  return { request, spec: await receiveFlowRequest(deps, runId, secret, action as "resume" | "cancel", request) };
}

async function answer(
  loadDeps: () => Promise<Deps>,
  event: unknown,
  context?: EndpointContext,
): Promise<APIGatewayProxyStructuredResultV2> {
  const startedMs = performance.now();
  const deps = await loadDeps();
  const remainingMs = context?.getRemainingTimeInMillis?.();
  const answerByMs = remainingMs === undefined ? undefined : deps.clock.nowMs() + remainingMs - ANSWER_MARGIN_MS;
  const requestId = context?.awsRequestId ?? "unknown";
  const log = deps.log.child({ request_id: requestId });
  const line: RequestLine = { method: "-", path: ENDPOINT_LOG_PATH, status: undefined, durationMs: 0, requestId };
  try {
    if (isFlowEvent(event)) {
      line.path = FLOW_LOG_PATH;
      const { request, spec } = await answerFlow(deps, event);
      line.method = request.method;
      if (!spec) throw notFound("route");
      const result = toApiGatewayResult(spec);
      line.status = result.statusCode;
      return result;
    }
    const { endpointKey, request } = toIncomingHttpRequest(httpInterfaceEventSchema.parse(event));
    line.method = request.method;
    const result = toApiGatewayResult(await receiveHttpRequest(deps, endpointKey, request, line, answerByMs));
    line.status = result.statusCode;
    return result;
  } catch (error) {
    // Only a failure of Sluice itself lands here: what the component does is in its answer.
    const result = errorResult(error, requestId, log);
    line.status = result.statusCode;
    return { ...result, headers: { ...result.headers, "x-request-id": requestId } };
  } finally {
    line.durationMs = performance.now() - startedMs;
    logRequest(deps.log, line);
  }
}
