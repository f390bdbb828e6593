/**
 * `$.send.http` and `$.send.s3` of a run, handed to the durable delivery queue (docs/design/workflows.md
 * 3.5 step 3 and 3.10). The contract between the run (`workflow-runs.ts`) and the deliveries.
 */

import type { SendRecord } from "#runtime/protocol";
import type { Deps } from "./ports/deps.ts";

/** A send that leaves through the delivery queue. (`emit` and `sse` are events, stored by the run.) */
export type DeliveredSend = Extract<SendRecord, { type: "http" | "s3" }>;

/** The workflow that sent, as deliveries need it. */
export interface SendingWorkflow {
  id: string;
  userId: string;
  workspaceId: string;
}

/** A send this server refused to queue (a URL that is not http(s), a bucket not allowed, ...). */
export interface SendRefusal {
  /** Index of the send in the list given. */
  index: number;
  /** Says why, for the `$errors` event; never quotes a secret (auth, headers). */
  reason: string;
}

/**
 * Queues each send as a delivery with a deterministic id (`runId` and its index), so a run applied
 * again after a crash queues nothing new. Answers the sends it refused; the others are durable
 * when the promise resolves.
 *
 * Placeholder until step 9 of the design builds the delivery targets: it refuses every send.
 */
export async function queueWorkflowSends(
  _deps: Deps,
  _workflow: SendingWorkflow,
  _runId: string,
  sends: DeliveredSend[],
  _nowMs: number,
): Promise<SendRefusal[]> {
  return sends.map((send, index) => ({ index, reason: `$.send.${send.type} is not available yet` }));
}
