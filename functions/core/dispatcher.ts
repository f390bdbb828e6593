/**
 * Fan-out of stored events to their listeners (rest-api.md "Events" 4-5; issue 5). Platform-free:
 * local mode calls it from its outbox relay (`functions/local-mode/drivers/outbox-relay.ts`), an AWS
 * dispatcher function from its bus rule.
 *
 * An event of source S (user U, workspace W) on channel C goes to every subscription on C whose
 * emitter key is S, `dc_*:U`, or W when C is `$errors` (subscription-model.ts). Each listener gets
 * each event once, however many of its subscriptions match:
 * - a webhook: one `DeliveryRecord` whose payload is the live stream's envelope (`sseEnvelope`),
 *   all of a batch's deliveries queued in event order by ONE `deliveries.enqueue`. Its id is
 *   {@link deliveryIdFor} (webhook, source, event), the same on every dispatch of the event, so a
 *   dispatch made again (local outbox, EventBridge or Lambda retries) queues nothing new where the
 *   queue still holds the delivery, and receivers deduplicate on the id where it was delivered;
 * - a source: a run with the emitted event as its `event`, queued in event order. A source may
 *   listen to its own custom channels, as in the original (real-behaviour.md §1.6); a loop it makes
 *   that way is its own, each hop being a queued run, never a recursion. The one guard: a source's
 *   own `$logs` and `$errors` are not delivered back to it, since any log line or error of the run
 *   they start would start another, forever;
 * - a workflow (`p_`): nothing yet (workflows arrive in a later issue); counted in the result.
 *
 * Cost when nobody listens: one subscription lookup per channel in the batch. The owner (U, W)
 * comes with the publish; only a publish without it (an EventBridge entry put before entries
 * carried it) costs a source read.
 */
import { createHash } from "node:crypto";
import type { Deps } from "#core/ports/deps";
import type { EmitterOwner } from "#core/ports/event-bus";
import type { RunJob } from "#core/ports/run-queue";
import { ERRORS_CHANNEL, type Json, LOGS_CHANNEL, type StoredEvent } from "./component-model.ts";
import { parseEventId } from "./event-ids.ts";
import { sseEnvelope } from "./event-views.ts";
import { hopsOf } from "./hops.ts";
import { formatId } from "./ids.ts";
import type { DeliveryRecord, SubscriptionRecord } from "./subscription-model.ts";

export type DispatchDeps = Pick<Deps, "sources" | "subscriptions" | "deliveries" | "runs" | "clock">;

/**
 * The id of the delivery of `eventId` (of `emitterId`) to `webhookId`: the same whichever
 * dispatch makes it, on both platforms. Shaped like every delivery id (`dlv_`, the event's ms, 60
 * bits), so dead letters still sort by time; the 60 bits are those of a SHA-256 of the three ids.
 */
export function deliveryIdFor(webhookId: string, emitterId: string, eventId: string): string {
  const ms = parseEventId(eventId)?.[0] ?? 0;
  const digest = createHash("sha256").update(`${webhookId}\n${emitterId}\n${eventId}`).digest();
  return formatId("delivery", ms, digest);
}

export interface DispatchResult {
  /** Webhook deliveries queued. */
  deliveries: number;
  /** Source runs queued. */
  runs: number;
  /** Events not delivered to workflow listeners (not implemented yet). */
  workflowsSkipped: number;
}

/** The emitter keys an event of `sourceId` on `channel` is found under (subscription-model.ts). */
export function emitterKeys(sourceId: string, owner: EmitterOwner | undefined, channel: string): string[] {
  if (!owner) return [sourceId];
  const keys = [sourceId, `dc_*:${owner.userId}`];
  if (channel === ERRORS_CHANNEL) keys.push(owner.workspaceId);
  return keys;
}

/** The listeners of one channel, each with every subscription of theirs that matched (oldest first). */
function byListener(subscriptions: readonly SubscriptionRecord[]): [string, SubscriptionRecord[]][] {
  const listeners = new Map<string, SubscriptionRecord[]>();
  for (const subscription of subscriptions) {
    const list = listeners.get(subscription.listenerId);
    if (list) list.push(subscription);
    else listeners.set(subscription.listenerId, [subscription]);
  }
  for (const list of listeners.values()) list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return [...listeners].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Routes one source's stored events (one `publish`: one source, id order) to their listeners.
 * `owner` is the source's, as the publisher gave it; without it the source is read (and a source
 * deleted since it emitted is then found under its exact id only). Resolves when every delivery
 * and run is queued; rejects when a store or queue failed (nothing of the batch's webhook
 * deliveries is then queued, since they go in one call).
 */
export async function dispatchEvents(
  deps: DispatchDeps,
  events: readonly StoredEvent[],
  owner?: EmitterOwner,
): Promise<DispatchResult> {
  const result: DispatchResult = { deliveries: 0, runs: 0, workflowsSkipped: 0 };
  const first = events[0];
  if (!first) return result;
  const sourceId = first.sourceId;
  const emitter = owner ?? (await deps.sources.getSource(sourceId));
  const listenersOf = new Map<string, [string, SubscriptionRecord[]][]>();
  let anyone = false;
  for (const event of events) {
    if (listenersOf.has(event.channel)) continue;
    const found = await deps.subscriptions.findSubscriptions(
      emitterKeys(sourceId, emitter, event.channel),
      event.channel,
    );
    listenersOf.set(event.channel, byListener(found));
    anyone ||= found.length > 0;
  }
  if (!anyone) return result;

  const now = deps.clock.nowMs();
  const deliveries: DeliveryRecord[] = [];
  const runs: RunJob[] = [];
  for (const event of events) {
    let payload: Json | undefined;
    for (const [listenerId, subscriptions] of listenersOf.get(event.channel) ?? []) {
      const kind = subscriptions[0]?.listenerKind;
      if (kind === "webhook") {
        payload ??= sseEnvelope(event) as unknown as Json;
        deliveries.push({
          id: deliveryIdFor(listenerId, event.sourceId, event.id),
          target: { kind: "webhook", webhookId: listenerId },
          subscriptionIds: subscriptions.map((subscription) => subscription.id),
          emitterId: event.sourceId,
          eventId: event.id,
          channel: event.channel,
          payload,
          attempts: 0,
          nextAttemptAt: now,
          createdAt: now,
          hops: hopsOf(event) + 1,
        });
      } else if (kind === "source") {
        const ownReservedChannel =
          listenerId === event.sourceId && (event.channel === LOGS_CHANNEL || event.channel === ERRORS_CHANNEL);
        // A source listening to a source is no delivery: the run keeps the event's hop count.
        const hops = hopsOf(event);
        if (!ownReservedChannel) {
          runs.push({ sourceId: listenerId, trigger: "event", event: event.event, ...(hops > 0 ? { hops } : {}) });
        }
      } else {
        result.workflowsSkipped++;
      }
    }
  }
  if (deliveries.length > 0) await deps.deliveries.enqueue(deliveries);
  for (const run of runs) await deps.runs.enqueue(run);
  result.deliveries = deliveries.length;
  result.runs = runs.length;
  return result;
}
