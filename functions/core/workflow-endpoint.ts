/**
 * A request to a workflow's HTTP trigger (`/http/<key>`), the same on both platforms
 * (docs/design/workflows.md 1.6). `receiveHttpRequest` (source-endpoint.ts) finds the key and hands
 * a workflow's here.
 *
 * Without `custom_response` the caller is answered once the run is queued durably. With it, the
 * run happens while the caller waits and the answer is `$.respond`'s, given once the run has ended
 * and its effects are stored (a 2xx never stands for lost effects; `immediate: true` is answered
 * the same way). An inactive workflow answers 404, as an unknown key does (real-behaviour.md §1.2).
 */
import type { Deps } from "#core/ports/deps";
import type { WorkflowRunJob } from "#core/ports/run-queue";
import type { HttpResponseSpec } from "#runtime/protocol";
import type { Json } from "./component-model.ts";
import { hopsOfRequest, isDeliveryLoop } from "./hops.ts";
import {
  corsPreflightResponse,
  DEFAULT_HTTP_RESPONSE,
  type IncomingHttpRequest,
  LOOP_DETECTED_RESPONSE,
  MAX_HTTP_INTERFACE_BODY_BYTES,
  NO_RESPONSE_TIMEOUT_STATUS,
  PAYLOAD_TOO_LARGE_RESPONSE,
  quotaExceededResponse,
  toHttpRunEvent,
  UNKNOWN_ENDPOINT_RESPONSE,
} from "./http-run-event.ts";
import type { HttpTriggerRecord, WorkflowRecord } from "./workflow-model.ts";
import { admitWorkflowRun, newRunId, runWorkflowNow, type WorkflowRunOutcome } from "./workflow-runs.ts";

function fixedResponse(status: number, contentType: string, body: string): HttpResponseSpec {
  return Object.freeze({
    status,
    headers: Object.freeze({ "content-type": contentType, "access-control-allow-origin": "*" }),
    body,
  });
}

const json = "application/json; charset=utf-8";

/** `custom_response` and the run ended (a success or `$.flow.exit`) without `$.respond` (real-behaviour.md §1.2). */
export const NO_RESPOND_RESPONSE = fixedResponse(400, "text/plain; charset=utf-8", "No $.respond called in workflow");
/** `custom_response` and a step failed before any `$.respond`. */
export const WORKFLOW_FAILED_BEFORE_RESPOND_RESPONSE = fixedResponse(
  400,
  json,
  JSON.stringify({ error: "the workflow failed before responding: see its $errors" }),
);
/** `custom_response` and the run reached its time limit without responding. */
export const WORKFLOW_RESPOND_TIMEOUT_RESPONSE = fixedResponse(
  NO_RESPONSE_TIMEOUT_STATUS,
  json,
  JSON.stringify({ error: "the workflow did not respond in time" }),
);
/** `custom_response` and the response `$.respond` gave was refused (over a limit, malformed). */
export const WORKFLOW_REFUSED_RESPONSE_RESPONSE = fixedResponse(
  502,
  json,
  JSON.stringify({ error: "the workflow's response was refused: see its $errors" }),
);

/** Answers one request to `workflow`'s HTTP trigger of `endpointKey`. */
export async function receiveWorkflowRequest(
  deps: Deps,
  workflow: WorkflowRecord,
  endpointKey: string,
  request: IncomingHttpRequest,
  answerByMs?: number,
): Promise<HttpResponseSpec> {
  const trigger = workflow.triggers.find(
    (candidate): candidate is HttpTriggerRecord => candidate.type === "http" && candidate.key === endpointKey,
  );
  if (!workflow.active || !trigger) return UNKNOWN_ENDPOINT_RESPONSE;
  if (request.method === "OPTIONS") return corsPreflightResponse(request.headers);
  if (request.body.length > MAX_HTTP_INTERFACE_BODY_BYTES) return PAYLOAD_TOO_LARGE_RESPONSE;
  const event = toHttpRunEvent(request) as unknown as Json;
  const hops = hopsOfRequest(request.headers);
  if (isDeliveryLoop(hops)) {
    deps.log.warn("a delivery loop was refused", { workflow_id: workflow.id, hops });
    return LOOP_DETECTED_RESPONSE;
  }
  const job: WorkflowRunJob = {
    kind: "workflow",
    workflowId: workflow.id,
    runId: newRunId(deps),
    trigger: "http",
    triggerId: trigger.id,
    event,
    ...(hops > 0 ? { hops } : {}),
  };
  const refusal = await admitWorkflowRun(deps, workflow, job);
  if (refusal) return quotaExceededResponse(refusal);
  if (!trigger.customResponse) {
    await deps.runs.enqueue(job);
    return DEFAULT_HTTP_RESPONSE;
  }
  return answerOf(await runWorkflowNow(deps, workflow, job, answerByMs));
}

/** The answer of a run a caller waited for (design 1.6). */
export function answerOf(outcome: WorkflowRunOutcome): HttpResponseSpec {
  // A fresh random run id cannot have ended already; were it so, nothing responded in this request.
  if (outcome.outcome === "done") return NO_RESPOND_RESPONSE;
  // The workflow was deleted while its run went: answered as its endpoint now is.
  if (outcome.outcome === "removed") return UNKNOWN_ENDPOINT_RESPONSE;
  if (outcome.response) return outcome.response;
  if (outcome.responseRefused) return WORKFLOW_REFUSED_RESPONSE_RESPONSE;
  if (outcome.error?.name === "TimeoutError") return WORKFLOW_RESPOND_TIMEOUT_RESPONSE;
  if (outcome.error) return WORKFLOW_FAILED_BEFORE_RESPOND_RESPONSE;
  return NO_RESPOND_RESPONSE;
}
