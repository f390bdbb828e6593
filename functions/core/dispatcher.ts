/**
 * Fan-out of stored events to their listeners (rest-api.md "Events" 4-5; issue 5). Platform-free:
 * local mode calls it from its outbox relay (`functions/local-mode/drivers/outbox-relay.ts`), an AWS
 * dispatcher function from its bus rule.
 *
 * An event of emitter E (a source `dc_` or a workflow `p_`, of user U, workspace W) on channel C
 * goes to every subscription on C whose emitter key is E, U's glob of E's kind (`dc_*:U` or
 * `p_*:U`), or W when C is `$errors` (subscription-model.ts). Each listener gets each event once,
 * however many of its subscriptions match:
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
 * - a workflow (`p_`): a run with the event as `steps.trigger.event`, queued in event order under
 *   the run id {@link eventRunId} (workflow, emitter, event), so a dispatch made again starts
 *   the run once (`WorkflowRunStore.beginRun` finds it done). The same guard as for sources: a
 *   workflow's own `$errors` never goes back to it. An inactive workflow's run is dropped when it
 *   is taken from the queue (`runWorkflow`), not here, which reads no workflow.
 *
 * Cost when nobody listens: one subscription lookup per channel in the batch. The owner (U, W)
 * comes with the publish; only a publish without it (an outbox row routed again, an EventBridge
 * entry put before entries carried it) costs a read of the source or workflow.
 */
import { createHash } from "node:crypto";
import type { Deps } from "#core/ports/deps";
import type { EmitterOwner } from "#core/ports/event-bus";
import type { RunJob } from "#core/ports/run-queue";
import { ERRORS_CHANNEL, type Json, LOGS_CHANNEL, type StoredEvent } from "./component-model.ts";
import { parseEventId } from "./event-ids.ts";
import { sseEnvelope } from "./event-views.ts";
import { hopsOf } from "./hops.ts";
import { formatId, ID_PREFIXES } from "./ids.ts";
import {
  type DeliveryRecord,
  globEmitterKey,
  SOURCES_GLOB,
  type SubscriptionRecord,
  WORKFLOWS_GLOB,
} from "./subscription-model.ts";

export type DispatchDeps = Pick<Deps, "sources" | "workflows" | "subscriptions" | "deliveries" | "runs" | "clock">;

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

/** Events of one millisecond whose runs list in their order (a run id has 3 characters for it). */
const ORDERED_PER_MS = 32 ** 3;

/**
 * The id of the run of workflow `workflowId` that event `eventId` of `emitterId` starts: the same
 * whichever dispatch makes it, timed by the event, and led after its time by the event's number
 * within its millisecond, so that runs list in event order (a hash alone sorted the events of one
 * millisecond at random).
 */
export function eventRunId(workflowId: string, emitterId: string, eventId: string): string {
  const [ms, n] = parseEventId(eventId) ?? [0, 0];
  const digest = createHash("sha256").update([workflowId, emitterId, eventId].join("\n")).digest();
  const seq = Math.min(n, ORDERED_PER_MS - 1);
  digest.set([Math.floor(seq / 1024) % 32, Math.floor(seq / 32) % 32, seq % 32]);
  return formatId("run", ms, digest);
}

export interface DispatchResult {
  /** Webhook deliveries queued. */
  deliveries: number;
  /** Source and workflow runs queued. */
  runs: number;
}

const isWorkflowId = (id: string) => id.startsWith(ID_PREFIXES.workflow);

/**
 * The emitter keys an event of `emitterId` (a source or a workflow) on `channel` is found under
 * (subscription-model.ts): its id, its owner's glob of its kind, and the workspace for `$errors`.
 */
export function emitterKeys(emitterId: string, owner: EmitterOwner | undefined, channel: string): string[] {
  if (!owner) return [emitterId];
  const keys = [emitterId, globEmitterKey(isWorkflowId(emitterId) ? WORKFLOWS_GLOB : SOURCES_GLOB, owner.userId)];
  if (channel === ERRORS_CHANNEL) keys.push(owner.workspaceId);
  return keys;
}

/** The owner of an emitter the publish did not name: read from its store; undefined once deleted. */
function readOwner(deps: DispatchDeps, emitterId: string): Promise<EmitterOwner | undefined> {
  return isWorkflowId(emitterId) ? deps.workflows.getWorkflow(emitterId) : deps.sources.getSource(emitterId);
}

/**
 * Whether `event` is one of the listener's own reserved channels: a source's or workflow's own
 * `$logs` and `$errors` never go back to it, since what the run they start logs or throws would
 * start another, forever.
 */
const ownReservedChannel = (listenerId: string, event: StoredEvent) =>
  listenerId === event.sourceId && (event.channel === LOGS_CHANNEL || event.channel === ERRORS_CHANNEL);

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
 * Routes one emitter's stored events (one `publish`: one source or workflow, id order) to their
 * listeners. `owner` is the emitter's, as the publisher gave it; without it the emitter is read
 * (and one deleted since it emitted is then found under its exact id only). Resolves when every delivery
 * and run is queued; rejects when a store or queue failed (nothing of the batch's webhook
 * deliveries is then queued, since they go in one call).
 */
export async function dispatchEvents(
  deps: DispatchDeps,
  events: readonly StoredEvent[],
  owner?: EmitterOwner,
): Promise<DispatchResult> {
  const result: DispatchResult = { deliveries: 0, runs: 0 };
  const first = events[0];
  if (!first) return result;
  const sourceId = first.sourceId;
  const emitter = owner ?? (await readOwner(deps, sourceId));
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
      } else if (!ownReservedChannel(listenerId, event)) {
        // A run started by an event is no delivery: it keeps the event's hop count.
        const hops = hopsOf(event);
        const counted = hops > 0 ? { hops } : {};
        if (kind === "source") {
          runs.push({ sourceId: listenerId, trigger: "event", event: event.event, ...counted });
        } else {
          runs.push({
            kind: "workflow",
            workflowId: listenerId,
            runId: eventRunId(listenerId, event.sourceId, event.id),
            trigger: "event",
            triggerId: event.sourceId,
            event: event.event,
            ...counted,
          });
        }
      }
    }
  }
  if (deliveries.length > 0) await deps.deliveries.enqueue(deliveries);
  for (const run of runs) await deps.runs.enqueue(run);
  result.deliveries = deliveries.length;
  result.runs = runs.length;
  return result;
}
