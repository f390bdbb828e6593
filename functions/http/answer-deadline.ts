/**
 * When a route's function must have answered: on AWS the shorter of what Lambda gives the
 * invocation and what API Gateway waits, less a margin for the answer itself; locally never (no
 * deadline). Deploying routes spend it phase by phase (#core/sources `runDeploySteps`; docs/aws.md
 * "Deploy time budget").
 */

/**
 * API Gateway's integration limit: an HTTP API gives up on a Lambda integration after 30 s and
 * answers 503 itself; 29 s leaves it room for its own work.
 */
export const API_GATEWAY_LIMIT_MS = 29_000;

/** What is kept for answering after the last phase: the final write, the answer, its way back. */
export const ANSWER_MARGIN_MS = 2_000;

/**
 * The epoch ms by which the route must answer, or undefined without a Lambda context (local mode).
 * `remainingMs` is Lambda's `getRemainingTimeInMillis()` at `nowMs`; `receivedAtMs` API Gateway's
 * `requestContext.timeEpoch`, when it received the request: a cold start's init counts against
 * its 30 s but not against the function's timeout, so the function's own clock alone would let a
 * deploy run past API Gateway.
 */
export function answerDeadline(
  nowMs: number,
  remainingMs: number | undefined,
  receivedAtMs: number | undefined,
): number | undefined {
  if (remainingMs === undefined) return undefined;
  const byFunction = nowMs + remainingMs;
  const byGateway = receivedAtMs === undefined ? byFunction : receivedAtMs + API_GATEWAY_LIMIT_MS;
  return Math.min(byFunction, byGateway) - ANSWER_MARGIN_MS;
}
