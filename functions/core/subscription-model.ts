/**
 * Entities of routing (rest-api.md "Subscriptions", "Webhooks"; issue 5). Times are epoch ms.
 *
 * An event of source S (owned by user U, in workspace W) on channel C reaches every subscription
 * whose `emitterKey` is one of `S`, `dc_*:U` (U's glob over all their sources) or, when C is
 * `$errors`, `W`; and whose `eventName` is C. Each listener receives the event once, however many
 * of its subscriptions match.
 */
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

/** One event to deliver to one webhook, as queued and retried (the unit a receiver deduplicates on). */
export interface DeliveryRecord {
  /** `dlv_...`: sent as the delivery id header; the same on every attempt and on replay. */
  id: string;
  webhookId: string;
  /** Every subscription that matched for this webhook (the first is sent as the subscription header). */
  subscriptionIds: string[];
  /** The emitter (source id) and the event id. */
  emitterId: string;
  eventId: string;
  channel: string;
  /** The JSON body POSTed, fixed when the delivery is made (a later event deletion does not change it). */
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

/** A delivery that failed every attempt, kept until replayed or deleted. */
export interface DeadLetterRecord extends DeliveryRecord {
  /** Owner of the webhook, for listing. */
  userId: string;
  failedAt: number;
}
