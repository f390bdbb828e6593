/**
 * The dead letters a user lists and replays (docs/webhooks.md "Dead letters and replay"): deliveries
 * that failed every attempt, kept per destination. A webhook's are events it did not take; a
 * workflow's are the `$.send.http` and `$.send.s3` sends of its runs. Replaying queues the delivery
 * again under the same id with a fresh set of attempts, then forgets the dead letter: queued first
 * and deleted second, so a failure in between can at worst deliver twice under one delivery id,
 * never lose it.
 */

import type { Deps } from "#core/ports/deps";
import { requireWebhook, requireWorkflow } from "./access.ts";
import { notFound } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { type PageQuery, pageEnvelope } from "./pagination.ts";
import {
  type DeadLetterRecord,
  type DeliveryRecord,
  destinationOf,
  type HttpSendRequest,
} from "./subscription-model.ts";
import { epochSeconds } from "./time.ts";

/** Dead letters replayed by one `replay` call at most. */
export const REPLAY_BATCH_MAX = 100;

/** What a redacted value reads as. */
export const REDACTED = "[redacted]";

export type ReplayDeps = Pick<Deps, "subscriptions" | "deadLetters" | "deliveries" | "clock">;
export type WorkflowReplayDeps = Pick<Deps, "workflows" | "identity" | "deadLetters" | "deliveries" | "clock">;

/** A webhook's dead letter as the API shows it (times in epoch seconds, like webhooks). */
function webhookDeadLetterView(deadLetter: DeadLetterRecord) {
  return {
    id: deadLetter.id,
    webhook_id: destinationOf(deadLetter),
    subscription_ids: deadLetter.subscriptionIds,
    emitter_id: deadLetter.emitterId,
    event_id: deadLetter.eventId,
    event_name: deadLetter.channel,
    attempts: deadLetter.attempts,
    last_error: deadLetter.lastError ?? null,
    created_at: epochSeconds(deadLetter.createdAt),
    failed_at: epochSeconds(deadLetter.failedAt),
    payload: deadLetter.payload,
  };
}

/**
 * Names of headers and query parameters whose values are credentials more often than not: shown
 * as {@link REDACTED} (a send's whole request is kept for its replay, in the server's own store).
 */
const SECRET_NAME = /auth|cookie|token|secret|key|signature|password|passwd|session|credential/i;

function redactedValues(values: Record<string, string> | undefined): Record<string, string> | null {
  if (!values) return null;
  return Object.fromEntries(
    Object.entries(values).map(([name, value]) => [name, SECRET_NAME.test(name) ? REDACTED : value]),
  );
}

/** The URL with a password and the values of secret-looking query parameters redacted. */
function redactedUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  let changed = false;
  if (parsed.password) {
    parsed.password = REDACTED;
    changed = true;
  }
  for (const name of new Set(parsed.searchParams.keys())) {
    if (!SECRET_NAME.test(name)) continue;
    parsed.searchParams.set(name, REDACTED);
    changed = true;
  }
  return changed ? parsed.href : url;
}

/** A `$.send.http` request as listed: everything its replay sends, but its credentials. */
function sendRequestView(request: HttpSendRequest) {
  return {
    method: request.method,
    url: redactedUrl(request.url),
    headers: redactedValues(request.headers),
    params: redactedValues(request.params),
    auth: request.auth ? { username: request.auth.username, password: REDACTED } : null,
    data: request.data ?? null,
  };
}

/** A workflow's dead letter (a send of one of its runs) as the API shows it. */
function workflowDeadLetterView(deadLetter: DeadLetterRecord) {
  const { target } = deadLetter;
  return {
    id: deadLetter.id,
    workflow_id: destinationOf(deadLetter),
    run_id: deadLetter.eventId,
    type: target.kind === "s3" ? ("s3" as const) : ("http" as const),
    request: target.kind === "http" ? sendRequestView(target.request) : null,
    s3: target.kind === "s3" ? { bucket: target.bucket, key: target.key, payload: target.body } : null,
    attempts: deadLetter.attempts,
    last_error: deadLetter.lastError ?? null,
    created_at: epochSeconds(deadLetter.createdAt),
    failed_at: epochSeconds(deadLetter.failedAt),
  };
}

/** The delivery a dead letter came from, ready to be attempted again from the start. */
function revived(deadLetter: DeadLetterRecord, now: number): DeliveryRecord {
  const { userId: _userId, failedAt: _failedAt, lastError: _lastError, ...delivery } = deadLetter;
  return { ...delivery, attempts: 0, nextAttemptAt: now };
}

type ReplayStores = Pick<Deps, "deadLetters" | "deliveries" | "clock">;

async function replayOne(deps: ReplayStores, destinationId: string, deliveryId: string): Promise<void> {
  const deadLetter = await deps.deadLetters.getDeadLetter(destinationId, deliveryId);
  if (!deadLetter) throw notFound("dead letter");
  await deps.deliveries.enqueue([revived(deadLetter, deps.clock.nowMs())]);
  await deps.deadLetters.deleteDeadLetter(destinationId, deadLetter.id);
}

/** Replays the oldest `limit` dead letters (in the order they were made) in one enqueue. */
async function replayOldest(deps: ReplayStores, destinationId: string, limit: number) {
  const batch = Math.min(Math.max(1, Math.floor(limit)), REPLAY_BATCH_MAX);
  // `before` a key below every delivery id gives the oldest page (pagination.ts: the nearest newer items).
  const page = await deps.deadLetters.listDeadLetters(destinationId, { limit: batch, before: "dlv_" });
  const oldestFirst = [...page.items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const now = deps.clock.nowMs();
  if (oldestFirst.length > 0) await deps.deliveries.enqueue(oldestFirst.map((deadLetter) => revived(deadLetter, now)));
  for (const deadLetter of oldestFirst) await deps.deadLetters.deleteDeadLetter(destinationId, deadLetter.id);
  return { replayed: oldestFirst.length, remaining: Math.max(0, page.totalCount - oldestFirst.length) };
}

/** `GET /webhooks/{id}/dead_letters`: newest first, paginated by delivery id. */
export async function listDeadLetters(
  deps: Pick<Deps, "subscriptions" | "deadLetters">,
  caller: Caller,
  webhookId: string,
  page: PageQuery,
) {
  const webhook = await requireWebhook(deps, caller, webhookId);
  const found = await deps.deadLetters.listDeadLetters(webhook.id, page);
  return pageEnvelope(found, (deadLetter) => deadLetter.id, webhookDeadLetterView, page);
}

/** `POST /webhooks/{id}/dead_letters/{delivery_id}/replay`. */
export async function replayDeadLetter(deps: ReplayDeps, caller: Caller, webhookId: string, deliveryId: string) {
  const webhook = await requireWebhook(deps, caller, webhookId);
  await replayOne(deps, webhook.id, deliveryId);
  return { id: deliveryId, webhook_id: webhook.id, replayed: true as const };
}

/** `POST /webhooks/{id}/dead_letters/replay`: the oldest `limit`; `remaining` says how many are left for another call. */
export async function replayAllDeadLetters(
  deps: ReplayDeps,
  caller: Caller,
  webhookId: string,
  limit = REPLAY_BATCH_MAX,
) {
  const webhook = await requireWebhook(deps, caller, webhookId);
  return { webhook_id: webhook.id, ...(await replayOldest(deps, webhook.id, limit)) };
}

/** `GET /workflows/{id}/dead_letters`: the sends of its runs that failed every attempt, newest first. */
export async function listWorkflowDeadLetters(
  deps: Pick<Deps, "workflows" | "identity" | "deadLetters">,
  caller: Caller,
  workflowId: string,
  page: PageQuery,
) {
  const workflow = await requireWorkflow(deps, caller, workflowId);
  const found = await deps.deadLetters.listDeadLetters(workflow.id, page);
  return pageEnvelope(found, (deadLetter) => deadLetter.id, workflowDeadLetterView, page);
}

/** `POST /workflows/{id}/dead_letters/{delivery_id}/replay`. */
export async function replayWorkflowDeadLetter(
  deps: WorkflowReplayDeps,
  caller: Caller,
  workflowId: string,
  deliveryId: string,
) {
  const workflow = await requireWorkflow(deps, caller, workflowId);
  await replayOne(deps, workflow.id, deliveryId);
  return { id: deliveryId, workflow_id: workflow.id, replayed: true as const };
}

/** `POST /workflows/{id}/dead_letters/replay`: the oldest `limit`, as for a webhook. */
export async function replayAllWorkflowDeadLetters(
  deps: WorkflowReplayDeps,
  caller: Caller,
  workflowId: string,
  limit = REPLAY_BATCH_MAX,
) {
  const workflow = await requireWorkflow(deps, caller, workflowId);
  return { workflow_id: workflow.id, ...(await replayOldest(deps, workflow.id, limit)) };
}
