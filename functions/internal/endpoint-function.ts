/**
 * The function behind the catch-all routes `ANY /http/{key}` and `ANY /http/{key}/{proxy+}`: every
 * request to a source's HTTP endpoint. It finds the source by the endpoint key and answers as
 * `receiveHttpRequest` decides: at once (the run is queued) or, for a custom response, with the
 * run's `respond(...)`, which on AWS arrives when the run ends.
 */
import type { APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { receiveHttpRequest } from "#core/source-endpoint";
import { errorResult } from "#http/pipeline";
import { httpInterfaceEventSchema, toApiGatewayResult, toIncomingHttpRequest } from "./api-gateway-http.ts";
import { loadAwsDeps } from "./internal-handler.ts";

export async function handler(
  event: unknown,
  context?: { awsRequestId?: string },
): Promise<APIGatewayProxyStructuredResultV2> {
  const deps = await loadAwsDeps();
  const requestId = context?.awsRequestId ?? "unknown";
  const log = deps.log.child({ request_id: requestId });
  try {
    const { endpointKey, request } = toIncomingHttpRequest(httpInterfaceEventSchema.parse(event));
    return toApiGatewayResult(await receiveHttpRequest(deps, endpointKey, request));
  } catch (error) {
    // Only a failure of Sluice itself lands here: what the component does is in its answer.
    const result = errorResult(error, requestId, log);
    return { ...result, headers: { ...result.headers, "x-request-id": requestId } };
  }
}
