/**
 * The dispatcher on AWS: the target of the EventBridge rule that matches what
 * `EventBridgeEventBus` publishes (`source` {@link EVENT_SOURCE}, `detail-type`
 * {@link EVENT_DETAIL_TYPE}), and the consumer of the unpublished-events queue, where the bus puts
 * the entries EventBridge kept refusing. It runs the same `dispatchEvents` as local mode, with the
 * webhook deliveries queued on the FIFO delivery queue (`SqsDeliveryQueue`) and the runs of
 * listening sources on the source runner (`LambdaRunQueue`).
 *
 * EventBridge hands an event over at least once, Lambda retries a failed dispatch twice and SQS
 * hands a message over again when its dispatch failed, so a dispatch may run again. It is
 * therefore made a pure function of the published detail: each delivery's id is derived from
 * (webhook, source, event) (`deliveryIdFor` of `#core/dispatcher`) and its times from the events,
 * never from when the dispatcher runs. A repeated dispatch makes byte-identical deliveries, which
 * the FIFO queue deduplicates for 5 minutes and receivers deduplicate on the delivery id after
 * that. A run of a listening source may run twice (at least once); a listening workflow's run id
 * is derived from the event (`eventRunId`), so it runs once.
 *
 * A published entry carries the events themselves, or, for an event too large for EventBridge, a
 * reference `{sourceId, eventId, channel}` that is read back from the store here. It carries the
 * source's `owner` too, which the subscriptions are found by; an entry put before entries carried
 * it (still in flight or in the dead-letter queue at an upgrade) is dispatched with a source read.
 *
 * From SQS (a batch, `ReportBatchItemFailures`), a message's body is an entry as EventBridge hands
 * it over (`{source, detail-type, detail}`: what the bus sends when EventBridge refused it, and what
 * EventBridge puts in the rule's dead-letter queue), or Lambda's record of a failed asynchronous
 * dispatch (`{requestPayload: <entry>, ...}`), so every message of the dispatch dead-letter queue
 * can be moved to the unpublished-events queue to be dispatched again (docs/aws.md).
 */
import type { SQSBatchResponse } from "aws-lambda";
import * as z from "zod";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE } from "#config/shared-names";
import type { StoredEvent } from "#core/component-model";
import { type DispatchDeps, dispatchEvents } from "#core/dispatcher";
import { EVENT_ID, parseEventId } from "#core/event-ids";
import { jsonValueSchema } from "#core/json-value";
import type { Deps } from "#core/ports/deps";
import { awsDepsLoader, internalHandler } from "./internal-handler.ts";

/** The emitter of published events: a source or a workflow. */
const emitterIdSchema = z.union([z.string().startsWith("dc_"), z.string().startsWith("p_")]);

const storedEventSchema = z.object({
  sourceId: emitterIdSchema,
  id: z.string().regex(EVENT_ID),
  indexedAtMs: z.number(),
  channel: z.string(),
  event: jsonValueSchema,
  emitId: z.string(),
  meta: z.looseObject({}),
});

/** The emitter's owner (`EmitterOwner`). */
const ownerSchema = z.object({ userId: z.string().startsWith("u_"), workspaceId: z.string().startsWith("o_") });

/** Events of one append of one source, in id order, inline. */
const inlineDetailSchema = z
  .object({
    sourceId: emitterIdSchema,
    owner: ownerSchema.optional(),
    events: z.array(storedEventSchema).min(1),
  })
  .refine((detail) => detail.events.every((event) => event.sourceId === detail.sourceId), {
    message: "every event must be of the entry's source",
  });

/** One event too large to travel inline: read back from the store. */
const referenceDetailSchema = z.object({
  sourceId: emitterIdSchema,
  owner: ownerSchema.optional(),
  eventId: z.string().regex(EVENT_ID),
  channel: z.string(),
});

/** The parts of the EventBridge event the dispatcher reads. */
export const dispatcherInputSchema = z.object({
  source: z.literal(EVENT_SOURCE),
  "detail-type": z.literal(EVENT_DETAIL_TYPE),
  detail: z.union([inlineDetailSchema, referenceDetailSchema]),
});
export type DispatcherInput = z.infer<typeof dispatcherInputSchema>;

/** The dependencies of one dispatch: its times from the events (see the module comment). */
export function dispatchDepsFor(deps: Deps, events: readonly StoredEvent[]): DispatchDeps {
  const storedAt = Math.max(...events.map((event) => event.indexedAtMs));
  return {
    sources: deps.sources,
    workflows: deps.workflows,
    subscriptions: deps.subscriptions,
    runs: deps.runs,
    deliveries: deps.deliveries,
    clock: { nowMs: () => storedAt },
  };
}

/** The event a reference names, or undefined when it was deleted or expired meanwhile. */
export async function readReferencedEvent(
  deps: Pick<Deps, "events">,
  reference: { sourceId: string; eventId: string; channel: string },
): Promise<StoredEvent | undefined> {
  const [ms, n] = parseEventId(reference.eventId) ?? [0, 0];
  // `after` the next id: the newest event at or before the one named.
  const page = await deps.events.listEvents(reference.sourceId, {
    channel: reference.channel,
    limit: 1,
    after: `${ms}-${n + 1}`,
    count: false,
  });
  const found = page.items[0];
  return found?.id === reference.eventId ? found : undefined;
}

/** Dispatches the events of one published entry. */
export async function dispatchEntry(deps: Deps, input: DispatcherInput): Promise<void> {
  const { detail } = input;
  let events: readonly StoredEvent[];
  if ("events" in detail) {
    events = detail.events as StoredEvent[];
  } else {
    const event = await readReferencedEvent(deps, detail);
    if (!event) {
      deps.log.warn("a published event no longer exists; it is not dispatched", {
        source_id: detail.sourceId,
        event_id: detail.eventId,
      });
      return;
    }
    events = [event];
  }
  await dispatchEvents(dispatchDepsFor(deps, events), events, detail.owner);
}

const sqsEventSchema = z.object({
  Records: z.array(z.object({ messageId: z.string(), body: z.string(), eventSource: z.literal("aws:sqs") })).min(1),
});

/** The entry a queued message carries: the entry itself, or inside Lambda's record of a failed invocation. */
function entryOfMessage(body: string): unknown {
  const parsed: unknown = JSON.parse(body);
  if (parsed !== null && typeof parsed === "object" && "requestPayload" in parsed) {
    return (parsed as { requestPayload: unknown }).requestPayload;
  }
  return parsed;
}

/**
 * Dispatches the entries of an SQS batch one after the other. A malformed message is logged and
 * dropped (handing it over again cannot fix it); a message whose dispatch failed is reported, so
 * SQS hands it over again after the visibility timeout (and moves it to the dead-letter queue
 * after the queue's receive limit).
 */
async function dispatchQueuedEntries(deps: Deps, event: z.infer<typeof sqsEventSchema>): Promise<SQSBatchResponse> {
  const failed: string[] = [];
  for (const record of event.Records) {
    let input: DispatcherInput;
    try {
      input = dispatcherInputSchema.parse(entryOfMessage(record.body));
    } catch (error) {
      deps.log.error("malformed queued stored events entry dropped", {
        message_id: record.messageId,
        error: error instanceof z.ZodError ? JSON.stringify(error.issues) : String(error),
      });
      continue;
    }
    try {
      await dispatchEntry(deps, input);
    } catch (error) {
      deps.log.error("queued stored events could not be dispatched; SQS hands them over again", {
        message_id: record.messageId,
        source_id: input.detail.sourceId,
        error: String(error),
      });
      failed.push(record.messageId);
    }
  }
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}

/**
 * The dispatcher's entry with its dependencies given (tests); {@link handler} builds the AWS ones.
 * An SQS batch (the unpublished-events queue) answers with its failed items; an EventBridge event
 * (the rule) resolves, or rejects so that Lambda retries it.
 */
export function createEventDispatcherHandler(
  // It reads subscriptions, queues workflow runs and webhook deliveries (lib/constructs/event-fanout.ts).
  loadDeps: () => Promise<Deps> = awsDepsLoader({
    deliveries: () => import("#adapters/aws/parts/deliveries"),
    runs: () => import("#adapters/aws/parts/runs"),
    tables: () => import("#adapters/aws/parts/tables"),
  }),
) {
  const fromRule = internalHandler("stored events entry", dispatcherInputSchema, dispatchEntry, loadDeps);
  return async (event: unknown): Promise<SQSBatchResponse | undefined> => {
    const batch = sqsEventSchema.safeParse(event);
    if (batch.success) return dispatchQueuedEntries(await loadDeps(), batch.data);
    await fromRule(event);
    return undefined;
  };
}

export const handler = createEventDispatcherHandler();
