/**
 * `$.send.http` and `$.send.s3` of a run, handed to the durable delivery queue (docs/design/workflows.md
 * 3.5 step 3 and 3.10). The contract between the run (`workflow-runs.ts`) and the deliveries: what
 * the sandbox asked is checked here (nothing it says is trusted), then queued as deliveries that
 * `attemptDelivery` (`webhook-delivery.ts`) sends, retries and dead-letters as webhooks'.
 */

import { createHash } from "node:crypto";
import { SEND_HTTP_METHODS, type SendRecord } from "#runtime/protocol";
import { formatId, idEpochMs } from "./ids.ts";
import type { Deps } from "./ports/deps.ts";
import type { DeliveryRecord, DeliveryTarget } from "./subscription-model.ts";

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

/** Longest `prefix` of a `$.send.s3`. */
export const S3_PREFIX_MAX_CHARS = 512;
/** The methods a send may use: the runtime's list (the sandbox is not trusted to have checked). */
const METHODS: ReadonlySet<string> = new Set(SEND_HTTP_METHODS);

/**
 * The id of the delivery of send `index` of run `runId` of `workflowId`: the same whenever the run
 * is applied, on both platforms. Shaped like every delivery id (`dlv_`, the run's ms, 60 bits of a
 * SHA-256 of the three), as `deliveryIdFor` of `#core/dispatcher` for events.
 */
export function sendDeliveryId(workflowId: string, runId: string, index: number): string {
  const digest = createHash("sha256").update(`send\n${workflowId}\n${runId}\n${index}`).digest();
  return formatId("delivery", idEpochMs("run", runId) ?? 0, digest);
}

/** The object key of send `index` of run `runId`: `<prefix><runId>-<index>.json`. */
export function sendObjectKey(prefix: string, runId: string, index: number): string {
  return `${prefix}${runId}-${index}.json`;
}

/** Why a send cannot be queued, or its target. */
function targetOf(
  deps: Pick<Deps, "objects">,
  workflowId: string,
  runId: string,
  send: DeliveredSend,
  index: number,
): DeliveryTarget | { reason: string } {
  if (send.type === "http") {
    if (!METHODS.has(send.method)) return { reason: "$.send.http: the method is not one a send may use" };
    let url: URL;
    try {
      url = new URL(send.url);
    } catch {
      return { reason: "$.send.http: the url is not a URL" };
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
      return { reason: "$.send.http: the url must be http or https, with a host" };
    }
    const { type: _type, ...request } = send;
    return { kind: "http", workflowId, request };
  }
  // The bucket is named in the reason: it is a name from the code, not a secret.
  if (!deps.objects.allowsBucket(send.bucket)) {
    return {
      reason: `$.send.s3: the bucket ${JSON.stringify(send.bucket.slice(0, 64))} is not allowed on this server`,
    };
  }
  if (send.prefix.length > S3_PREFIX_MAX_CHARS) {
    return { reason: `$.send.s3: the prefix is over ${S3_PREFIX_MAX_CHARS} characters` };
  }
  if (send.prefix.split("/").includes("..")) return { reason: "$.send.s3: the prefix has a .. segment" };
  const key = sendObjectKey(send.prefix, runId, index);
  // A key the store can never take is refused now, rather than tried eight times over hours.
  const problem = deps.objects.keyProblem(key);
  if (problem !== undefined) return { reason: `$.send.s3: ${problem}` };
  return { kind: "s3", workflowId, bucket: send.bucket, key, body: send.payload };
}

/**
 * Queues each send as a delivery with a deterministic id (`sendDeliveryId`), so a run applied
 * again after a crash queues nothing new. Answers the sends it refused; the others are durable
 * when the promise resolves.
 */
export async function queueWorkflowSends(
  deps: Pick<Deps, "objects" | "deliveries">,
  workflow: SendingWorkflow,
  runId: string,
  sends: DeliveredSend[],
  nowMs: number,
  /** Webhook deliveries and sends that led to this run (`#core/hops`); a `$.send.http` is one more. */
  hops = 0,
): Promise<SendRefusal[]> {
  const refusals: SendRefusal[] = [];
  const deliveries: DeliveryRecord[] = [];
  for (const [index, send] of sends.entries()) {
    const target = targetOf(deps, workflow.id, runId, send, index);
    if ("reason" in target) {
      refusals.push({ index, reason: target.reason });
      continue;
    }
    deliveries.push({
      id: sendDeliveryId(workflow.id, runId, index),
      target,
      subscriptionIds: [],
      emitterId: workflow.id,
      eventId: runId,
      channel: "",
      payload: null,
      attempts: 0,
      nextAttemptAt: nowMs,
      createdAt: nowMs,
      // A request may reach a Sluice endpoint (its own trigger): it carries the count, so a loop ends in 508.
      ...(target.kind === "http" ? { hops: hops + 1 } : {}),
    });
  }
  if (deliveries.length > 0) await deps.deliveries.enqueue(deliveries);
  return refusals;
}
