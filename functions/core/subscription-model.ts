/**
 * Entities of routing (rest-api.md "Subscriptions", "Webhooks"; issue 5). Times are epoch ms.
 *
 * An event of source S (owned by user U, in workspace W) on channel C reaches every subscription
 * whose `emitterKey` is one of `S`, `dc_*:U` (U's glob over all their sources) or, when C is
 * `$errors`, `W`; and whose `eventName` is C. Each listener receives the event once, however many
 * of its subscriptions match.
 */
import type { SendRecord } from "#runtime/protocol";
import type { Json } from "./component-model.ts";

/** A `wh_` webhook: a URL that receives events by HTTP POST, signed with its own secret. */
export interface WebhookRecord {
  id: string;
  userId: string;
  workspaceId: string;
  url: string;
  name: string;
  description: string;
  /** The signing secret sealed by the `Secrets` port; shown once in clear at creation and rotation. */
  sealedSigningSecret: string;
  createdAt: number;
  updatedAt: number;
}

/** `dc_*`: every source of the subscribing user; `p_*`: every workflow of theirs. */
export const SOURCES_GLOB = "dc_*";
export const WORKFLOWS_GLOB = "p_*";

/** The `emitterKey` of a glob subscription, `dc_*:<userId>` or `p_*:<userId>`: a glob is its user's alone. */
export function globEmitterKey(glob: typeof SOURCES_GLOB | typeof WORKFLOWS_GLOB, userId: string): string {
  return `${glob}:${userId}`;
}

/** What a subscription's emitter is. */
export type EmitterKind = "source" | "workflow" | "sources-glob" | "workflows-glob" | "workspace";
/** What a subscription's listener is. */
export type ListenerKind = "webhook" | "source" | "workflow";

/** A `sub_` subscription: events of an emitter's channel go to a listener. */
export interface SubscriptionRecord {
  id: string;
  /** The user who made it; `dc_*` / `p_*` mean this user's sources / workflows. */
  userId: string;
  /** The workspace it is listed under (the listener's). */
  workspaceId: string;
  /** As given: `dc_...`, `p_...`, `dc_*`, `p_*` or `o_...`. */
  emitterId: string;
  emitterKind: EmitterKind;
  /**
   * The lookup key of the emitter: the id itself, or `dc_*:<userId>` / `p_*:<userId>` for globs.
   * Unique together with `listenerId` and `eventName`: subscribing twice returns the first one.
   */
  emitterKey: string;
  listenerId: string;
  listenerKind: ListenerKind;
  /** `""` for the default channel, a custom name, `$errors` or `$logs`. */
  eventName: string;
  createdAt: number;
}

/** An auto subscription: the listener is subscribed to `eventName` of every source created later. */
export interface AutoSubscriptionRecord {
  id: string;
  userId: string;
  workspaceId: string;
  eventName: string;
  listenerId: string;
  listenerKind: ListenerKind;
  createdAt: number;
}

/**
 * A `$.send.http` as the delivery sends it: the run's `SendRecord` less its type. Checked when
 * queued (`queueWorkflowSends`: an http(s) URL with a host, an upper-case method); `auth` is never
 * logged nor quoted in an error.
 */
export type HttpSendRequest = Omit<Extract<SendRecord, { type: "http" }>, "type">;

/**
 * Where a delivery goes (decision W12): a webhook's event, or a workflow's `$.send.http` /
 * `$.send.s3`. Deliveries queued before workflows existed have no target and a top-level
 * `webhookId`: {@link storedDelivery} reads them as webhook deliveries.
 */
export type DeliveryTarget =
  | { kind: "webhook"; webhookId: string }
  | { kind: "http"; workflowId: string; request: HttpSendRequest }
  | { kind: "s3"; workflowId: string; bucket: string; key: string; body: Json };

/**
 * One thing to deliver to one destination, as queued and retried (the unit a receiver
 * deduplicates on): an event to a webhook, or a send of a workflow's run.
 */
export interface DeliveryRecord {
  /** `dlv_...`: sent as the delivery id header; the same on every attempt and on replay. */
  id: string;
  target: DeliveryTarget;
  /** Every subscription that matched for this webhook (the first is sent as the subscription header); none for a send. */
  subscriptionIds: string[];
  /** The emitter (source or workflow id) and the event id; for a send, the workflow and the run id. */
  emitterId: string;
  eventId: string;
  /** The event's channel; `""` for a send. */
  channel: string;
  /**
   * The JSON body POSTed to a webhook, fixed when the delivery is made (a later event deletion
   * does not change it). Null for a send: its target carries what is sent.
   */
  payload: Json;
  /** Attempts made so far. */
  attempts: number;
  /** When the next attempt is due (epoch ms). */
  nextAttemptAt: number;
  createdAt: number;
  /** Why the last attempt failed (`HTTP 503`, `timeout after 10000 ms`, `ECONNREFUSED`...). */
  lastError?: string;
  /**
   * Webhook deliveries that led here, this one included (`#core/hops`): sent as `x-sluice-hops`.
   * Absent on deliveries queued before Sluice counted them, and on dead letters (a replay counts
   * from 1 again): 1.
   */
  hops?: number;
}

/**
 * The webhook (`wh_`) or workflow (`p_`) a delivery belongs to: the queues order and hold
 * deliveries per destination, and its dead letters are kept under it.
 */
export function destinationOf(delivery: Pick<DeliveryRecord, "target">): string {
  return delivery.target.kind === "webhook" ? delivery.target.webhookId : delivery.target.workflowId;
}

/**
 * A delivery as a queue stored it, read back: one queued by a version before workflows (no
 * `target`, a top-level `webhookId`) becomes a webhook delivery. Checks nothing else: the record
 * was written by Sluice.
 */
export function storedDelivery<T extends DeliveryRecord>(
  stored: Omit<T, "target"> & { target?: DeliveryTarget; webhookId?: string },
): T {
  if (stored.target) return stored as T;
  const { webhookId, ...rest } = stored;
  return { ...rest, target: { kind: "webhook", webhookId: String(webhookId) } } as unknown as T;
}

/** A delivery that failed every attempt, kept until replayed or deleted. */
export interface DeadLetterRecord extends DeliveryRecord {
  /** Owner of the webhook or workflow, for listing. */
  userId: string;
  failedAt: number;
}
