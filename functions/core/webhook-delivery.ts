/**
 * Delivery of events to webhooks (docs/webhooks.md): the retry policy and one attempt (the dead
 * letters a user lists and replays are in `dead-letters.ts`). Platform-free: the local worker
 * (`functions/local-mode/drivers/delivery-worker.ts`) and the AWS deliverer
 * (`functions/internal/webhook-deliverer.ts`) both call `attemptDelivery`, apply its outcome to
 * their own queue and log it with `logDeliveryOutcome`.
 *
 * An attempt POSTs the delivery's fixed payload, signed (`webhook-signature.ts`). A 2xx is success;
 * any other status, a timeout, a refused connection or a refused address is a failure, retried
 * after an exponential delay with full jitter (`random() * min(cap, base * 2^(n-1))` after the n-th
 * failure) until `maxAttempts` attempts were made; then the delivery becomes a dead letter. The
 * same delivery id is sent on every attempt and on replay, so a receiver deduplicates on it.
 */

import type { Deps } from "#core/ports/deps";
import type { Logger } from "#core/ports/logger";
import type { WebhookSender } from "#core/ports/webhook-sender";
import { responseHeaders } from "#runtime/http-response";
import { HOPS_HEADER } from "./hops.ts";
import {
  type DeadLetterRecord,
  type DeliveryRecord,
  destinationOf,
  type HttpSendRequest,
} from "./subscription-model.ts";
import { epochSeconds } from "./time.ts";
import {
  SIGNATURE_HEADER,
  STANDARD_WEBHOOK_HEADERS,
  signWebhookBody,
  standardWebhookSignature,
} from "./webhook-signature.ts";
import { openSigningSecret } from "./webhooks.ts";

export interface DeliverySettings {
  /** Attempts in all, the first included. @default 8 */
  maxAttempts: number;
  /** Delay bound after the first failure. @default 30000 */
  baseDelayMs: number;
  /** Largest delay bound between two attempts. @default 1800000 (30 min) */
  maxDelayMs: number;
  /** Time limit of one POST (connect, send, status line). @default 10000 */
  timeoutMs: number;
  /** A number in [0, 1): the jitter. @default Math.random */
  random: () => number;
}

/**
 * 8 attempts; the delay bounds are 30 s, 1, 2, 4, 8, 16 and 30 min, so the last attempt comes at
 * most about 62 minutes (plus the attempts' own time) after the first, on average half of that.
 */
export const DEFAULT_DELIVERY_SETTINGS: Readonly<DeliverySettings> = Object.freeze({
  maxAttempts: 8,
  baseDelayMs: 30_000,
  maxDelayMs: 30 * 60_000,
  timeoutMs: 10_000,
  random: Math.random,
});

export function deliverySettings(overrides: Partial<DeliverySettings> = {}): DeliverySettings {
  const settings = { ...DEFAULT_DELIVERY_SETTINGS, ...overrides };
  if (!(settings.maxAttempts >= 1)) throw new Error("delivery settings: maxAttempts must be at least 1");
  return settings;
}

/** The upper bound of the delay before the next attempt, after `failedAttempts` failures (1 or more). */
export function retryDelayBoundMs(
  failedAttempts: number,
  settings: Pick<DeliverySettings, "baseDelayMs" | "maxDelayMs">,
) {
  const exponent = Math.min(Math.max(failedAttempts - 1, 0), 52);
  return Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** exponent);
}

/** The delay before the next attempt, drawn uniformly in [0, bound] ("full jitter"). */
export function retryDelayMs(
  failedAttempts: number,
  settings: Pick<DeliverySettings, "baseDelayMs" | "maxDelayMs" | "random">,
): number {
  return Math.floor(settings.random() * (retryDelayBoundMs(failedAttempts, settings) + 1));
}

/** The longest time from the first attempt to the last one, not counting the attempts themselves. */
export function retryWindowMs(settings: Pick<DeliverySettings, "maxAttempts" | "baseDelayMs" | "maxDelayMs">) {
  let total = 0;
  for (let failed = 1; failed < settings.maxAttempts; failed++) total += retryDelayBoundMs(failed, settings);
  return total;
}

const WEBHOOK_USER_AGENT = "Sluice-Webhooks/1";

/** The headers of one attempt; `body` is the exact text sent. */
function deliveryHeaders(delivery: DeliveryRecord, secret: string, timestampSec: number, body: string) {
  return {
    "content-type": "application/json",
    "user-agent": WEBHOOK_USER_AGENT,
    "x-sluice-event-id": delivery.eventId,
    "x-sluice-subscription-id": delivery.subscriptionIds[0] ?? "",
    "x-sluice-delivery-id": delivery.id,
    "x-sluice-timestamp": String(timestampSec),
    [SIGNATURE_HEADER]: signWebhookBody(secret, timestampSec, body),
    [STANDARD_WEBHOOK_HEADERS.id]: delivery.id,
    [STANDARD_WEBHOOK_HEADERS.timestamp]: String(timestampSec),
    [STANDARD_WEBHOOK_HEADERS.signature]: standardWebhookSignature(secret, delivery.id, timestampSec, body),
    [HOPS_HEADER]: String(delivery.hops ?? 1),
  };
}

/**
 * 508 Loop Detected: the receiver (a Sluice endpoint, `#core/hops`) refused the delivery as part
 * of a loop. The same request would be refused again, so it is not retried.
 */
const LOOP_DETECTED_STATUS = 508;

/** What became of one attempt; the caller applies it to its queue. */
export type DeliveryOutcome =
  | { kind: "delivered"; status: number; attempts: number }
  /** Failed; attempt again at `at` (epoch ms) with `attempts` made so far. */
  | { kind: "retry"; at: number; attempts: number; error: string }
  /** Failed for the last time; the dead letter is stored. */
  | { kind: "dead"; attempts: number; error: string }
  /** The webhook no longer exists: nothing was sent, nothing is kept. */
  | { kind: "dropped"; reason: string };

export type DeliveryDeps = Pick<Deps, "subscriptions" | "workflows" | "objects" | "secrets" | "deadLetters" | "clock">;

/** What one send of an attempt came to, before the retry policy: as `WebhookSender` answers. */
type SendResult = { status: number } | { error: string };

/** Where an attempt went and who owns it; undefined when the destination was deleted (the delivery is dropped). */
interface Sent {
  result: SendResult;
  /** The owner of the destination, for the dead letter. */
  userId: string;
}

/**
 * Makes one attempt of `delivery` at `now` (epoch ms). Resolves with the outcome; rejects only
 * when Sluice itself failed (a store, the secret), in which case the attempt does not count and
 * the caller should try again later.
 *
 * A webhook gets the signed POST; a `$.send.http` its own request, unsigned (the user owns it:
 * `sendRequest`); a `$.send.s3` one object through the `ObjectSink`. Retries and dead letters are
 * the same for all three.
 */
export async function attemptDelivery(
  deps: DeliveryDeps,
  sender: WebhookSender,
  delivery: DeliveryRecord,
  now: number,
  settings: DeliverySettings = DEFAULT_DELIVERY_SETTINGS,
): Promise<DeliveryOutcome> {
  const sent = await send(deps, sender, delivery, now, settings);
  if (!sent) return dropped(delivery);
  const { result } = sent;
  const attempts = delivery.attempts + 1;
  if ("status" in result && result.status >= 200 && result.status < 300) {
    return { kind: "delivered", status: result.status, attempts };
  }
  // Webhooks and `$.send.http` carry the hop count (decision 269), so a 508 is a loop refusal and the
  // same request would be refused again; an s3 send never gets an HTTP status of its own.
  const loop = "status" in result && result.status === LOOP_DETECTED_STATUS && delivery.target.kind !== "s3";
  const error =
    "status" in result ? `HTTP ${result.status}${loop ? " (a delivery loop: not retried)" : ""}` : result.error;
  const finishedAt = Math.max(now, deps.clock.nowMs());
  if (attempts < settings.maxAttempts && !loop) {
    return { kind: "retry", at: finishedAt + retryDelayMs(attempts, settings), attempts, error };
  }
  const deadLetter: DeadLetterRecord = {
    ...delivery,
    attempts,
    lastError: error,
    userId: sent.userId,
    failedAt: finishedAt,
  };
  await deps.deadLetters.putDeadLetter(deadLetter);
  // Its webhook or workflow deleted while this attempt ran: the deletion sweeps dead letters before
  // and after removing its record, so this one goes unless written after the second sweep, which
  // this look catches.
  if (!(await destinationExists(deps, delivery))) {
    await deps.deadLetters.deleteDeadLetter(destinationOf(deadLetter), deadLetter.id);
    return dropped(delivery);
  }
  return { kind: "dead", attempts, error };
}

function dropped(delivery: DeliveryRecord): DeliveryOutcome {
  return {
    kind: "dropped",
    reason: delivery.target.kind === "webhook" ? "the webhook was deleted" : "the workflow was deleted",
  };
}

async function destinationExists(deps: DeliveryDeps, { target }: DeliveryRecord): Promise<boolean> {
  if (target.kind === "webhook") return (await deps.subscriptions.getWebhook(target.webhookId)) !== undefined;
  return (await deps.workflows.getWorkflow(target.workflowId)) !== undefined;
}

/** The attempt itself, by target. */
async function send(
  deps: DeliveryDeps,
  sender: WebhookSender,
  delivery: DeliveryRecord,
  now: number,
  settings: DeliverySettings,
): Promise<Sent | undefined> {
  const { target } = delivery;
  if (target.kind === "webhook") {
    const webhook = await deps.subscriptions.getWebhook(target.webhookId);
    if (!webhook) return undefined;
    const secret = await openSigningSecret(deps, webhook);
    const body = JSON.stringify(delivery.payload);
    const headers = deliveryHeaders(delivery, secret, epochSeconds(now), body);
    return { userId: webhook.userId, result: await sender.post(webhook.url, headers, body, settings.timeoutMs) };
  }
  const workflow = await deps.workflows.getWorkflow(target.workflowId);
  if (!workflow) return undefined;
  if (target.kind === "s3") {
    const stored = await deps.objects.putObject(
      target.bucket,
      target.key,
      JSON.stringify(target.body),
      "application/json",
    );
    // An object stored counts as a 200, so that the outcome reads the same for all targets.
    return { userId: workflow.userId, result: "stored" in stored ? { status: 200 } : stored };
  }
  const request = sendRequest(target.request, delivery.hops ?? 1);
  if ("error" in request) return { userId: workflow.userId, result: request };
  return {
    userId: workflow.userId,
    result: await sender.post(request.url, request.headers, request.body, settings.timeoutMs, request.method),
  };
}

/**
 * Request headers Sluice sets itself: the URL names the host, the body is framed by the sender, and
 * the hop count is Sluice's (a step cannot reset it to escape the loop refusal, `#core/hops`).
 */
const SENDER_OWN_HEADERS = new Set(["host", HOPS_HEADER]);

/** A `$.send.http` as it goes on the wire. */
export interface OutgoingRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * Builds the request of a `$.send.http`: `params` appended to the URL's query; the user's headers
 * less the framing and hop-by-hop ones (as a component's response, `responseHeaders`) and `Host`;
 * `auth` as `Authorization: Basic` (over a header of that name, as axios does); `data` as it is
 * when a string, else as JSON with `content-type: application/json` unless the user set a content
 * type. None of Sluice's signing headers: the user owns the request. An error never quotes a
 * header or the auth.
 */
export function sendRequest(request: HttpSendRequest, hops = 1): OutgoingRequest | { error: string } {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return { error: "invalid URL" };
  }
  for (const [name, value] of Object.entries(request.params ?? {})) url.searchParams.append(name, value);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(responseHeaders(request.headers))) {
    if (!SENDER_OWN_HEADERS.has(name.toLowerCase())) headers[name] = value;
  }
  const has = (wanted: string) => Object.keys(headers).find((name) => name.toLowerCase() === wanted);
  if (request.auth) {
    const named = has("authorization");
    if (named) delete headers[named];
    const credentials = Buffer.from(`${request.auth.username}:${request.auth.password}`, "utf8").toString("base64");
    headers.authorization = `Basic ${credentials}`;
  }
  let body = "";
  if (request.data !== undefined && request.data !== null) {
    const text = typeof request.data === "string";
    body = text ? (request.data as string) : JSON.stringify(request.data);
    if (!has("content-type")) headers["content-type"] = text ? "text/plain; charset=utf-8" : "application/json";
  }
  headers[HOPS_HEADER] = String(hops);
  return { method: request.method, url: url.toString(), headers, body };
}

/** The log fields that name a delivery (never its payload, nor a send's request: the user's data). */
export function deliveryLogFields(delivery: DeliveryRecord) {
  const { target } = delivery;
  if (target.kind === "webhook") {
    return {
      delivery_id: delivery.id,
      webhook_id: target.webhookId,
      source_id: delivery.emitterId,
      event_id: delivery.eventId,
    };
  }
  return { delivery_id: delivery.id, workflow_id: target.workflowId, run_id: delivery.eventId, send: target.kind };
}

/** Logs what became of an attempt (nothing when it was delivered), the same on both platforms. */
export function logDeliveryOutcome(log: Logger, delivery: DeliveryRecord, outcome: DeliveryOutcome): void {
  const fields = deliveryLogFields(delivery);
  switch (outcome.kind) {
    case "delivered":
      return;
    case "retry":
      log.info("webhook delivery failed; it will be retried", {
        ...fields,
        attempts: outcome.attempts,
        error: outcome.error,
        next_attempt_at: new Date(outcome.at).toISOString(),
      });
      return;
    case "dead":
      log.warn("webhook delivery failed every attempt; kept as a dead letter", {
        ...fields,
        attempts: outcome.attempts,
        error: outcome.error,
      });
      return;
    case "dropped":
      log.info("webhook delivery dropped", { ...fields, reason: outcome.reason });
      return;
  }
}
