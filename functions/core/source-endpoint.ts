/**
 * A request to a source's HTTP endpoint (`/http/<key>`), the same on both platforms. A key of a
 * workflow's HTTP trigger goes to `receiveWorkflowRequest` (workflow-endpoint.ts).
 *
 * Without `customResponse` the caller is answered once the run is queued durably (the original
 * answers 200 before and independently of `run`, real-behaviour.md §1.2). With it, the answer is
 * the first `respond(...)` of the run, sent when the run has ended and its effects are stored; a
 * run that throws or ends before responding gets 400, one that never responds within its time
 * limit gets the timeout answer. A workspace over its runs-per-minute or a daily quota gets 429
 * and nothing runs.
 */
import type { Deps } from "#core/ports/deps";
import type { HttpResponseSpec } from "#runtime/protocol";
import type { Json } from "./component-model.ts";
import { recordDeliveryLoop } from "./delivery-loops.ts";
import { hopsOfRequest, isDeliveryLoop } from "./hops.ts";
import {
  corsPreflightResponse,
  DEFAULT_HTTP_RESPONSE,
  ENDED_WITHOUT_RESPOND_RESPONSE,
  FAILED_BEFORE_RESPOND_RESPONSE,
  INACTIVE_SOURCE_RESPONSE,
  type IncomingHttpRequest,
  LOOP_DETECTED_RESPONSE,
  MAX_HTTP_INTERFACE_BODY_BYTES,
  PAYLOAD_TOO_LARGE_RESPONSE,
  quotaExceededResponse,
  REFUSED_RESPONSE_RESPONSE,
  RESPOND_TIMEOUT_RESPONSE,
  toHttpRunEvent,
  UNKNOWN_ENDPOINT_RESPONSE,
} from "./http-run-event.ts";
import { HTTP_INTERFACE } from "./props.ts";
import { checkResponse } from "./run-limits.ts";
import { admitRun, invokeSource, loadComponent, propsOf } from "./source-runs.ts";
import { receiveWorkflowRequest } from "./workflow-endpoint.ts";

/** A response as the source gave it, if it passes `checkResponse`; else {@link REFUSED_RESPONSE_RESPONSE}. */
function trustedResponse(response: HttpResponseSpec): HttpResponseSpec {
  const checked = checkResponse(response);
  return "response" in checked ? checked.response : REFUSED_RESPONSE_RESPONSE;
}

/**
 * Answers one request to an HTTP interface endpoint. `reached`, when given, gets the id of the
 * source the key belongs to, for the caller's request line. `answerByMs`, when given, is when the
 * caller must have its answer (epoch ms): a custom-response run's time limit ends then, so a run
 * that times out still gets its timeout answer and its events stored.
 */
export async function receiveHttpRequest(
  deps: Deps,
  endpointKey: string,
  request: IncomingHttpRequest,
  reached?: { sourceId?: string },
  answerByMs?: number,
): Promise<HttpResponseSpec> {
  // Sources and workflows share the one catch-all route and its random keys: both are looked up at
  // once, so a workflow's request waits for no extra round trip (design W14).
  const [source, workflow] = await Promise.all([
    deps.sources.findSourceByEndpointKey(endpointKey),
    deps.workflows.findWorkflowByHttpKey(endpointKey),
  ]);
  if (!source) {
    if (!workflow) return UNKNOWN_ENDPOINT_RESPONSE;
    if (reached) reached.sourceId = workflow.id;
    return receiveWorkflowRequest(deps, workflow, endpointKey, request, answerByMs);
  }
  if (reached) reached.sourceId = source.id;
  if (request.method === "OPTIONS") {
    return corsPreflightResponse(request.headers);
  }
  if (request.body.length > MAX_HTTP_INTERFACE_BODY_BYTES) return PAYLOAD_TOO_LARGE_RESPONSE;
  if (!source.active) return INACTIVE_SOURCE_RESPONSE;
  const component = await loadComponent(deps, source.componentId);
  if (!component) return UNKNOWN_ENDPOINT_RESPONSE;

  const event = toHttpRunEvent(request) as unknown as Json;
  const hops = hopsOfRequest(request.headers);
  if (isDeliveryLoop(hops)) {
    await recordDeliveryLoop(deps, source, event, hops);
    return LOOP_DETECTED_RESPONSE;
  }
  const refusal = await admitRun(deps, source, event);
  if (refusal) return quotaExceededResponse(refusal);
  const httpProp = propsOf(source, component).find((prop) => prop.type === HTTP_INTERFACE);
  if (httpProp?.customResponse !== true) {
    await deps.runs.enqueue({ sourceId: source.id, trigger: "http", event, ...(hops > 0 ? { hops } : {}) });
    return DEFAULT_HTTP_RESPONSE;
  }

  // The answer waits for the run's end and for its effects to be stored, so a 2xx never stands
  // for emits or db writes that were lost; a store that fails makes the request fail (503 for a
  // full or read-only data dir) instead. AWS answers at the run's end anyway, and the original
  // sends a `$.respond` without `immediate` at the end of the workflow (real-behaviour.md §1.9).
  const { result } = await invokeSource(deps, source, component, "run", event, undefined, hops, answerByMs);
  // What the host hands over came from untrusted code: normalised again, or refused with a 502.
  if (result.response) return trustedResponse(result.response);
  if (result.error?.name === "TimeoutError") return RESPOND_TIMEOUT_RESPONSE;
  if (result.error) return FAILED_BEFORE_RESPOND_RESPONSE;
  return ENDED_WITHOUT_RESPOND_RESPONSE;
}
