/**
 * `EventBus` on AWS: `PutEvents` on the stack's custom bus, right after each append
 * (`storeAndPublish` in `#core/source-runs`). A rule on the bus hands every entry to the dispatcher
 * function (`functions/internal/event-dispatcher.ts`), which routes the events to subscribers.
 *
 * One publish (one append of one source, id order) becomes as few entries as fit: each entry's
 * `detail` is `{sourceId, owner, events: [...]}` with consecutive events, at most
 * {@link MAX_ENTRY_BYTES}; `owner` is the source's `{userId, workspaceId}`, so the dispatcher need
 * not read the source. An event that does not fit in an entry by itself (emits may reach 256 KiB,
 * EventBridge's limit for a whole request) travels as a reference
 * `{sourceId, owner, eventId, channel}`, and the dispatcher reads it from the store. Entries go in
 * requests of at most 10 entries and {@link MAX_REQUEST_BYTES}, one request after the other.
 *
 * Entries EventBridge refuses (`FailedEntryCount`, throttling above all) and requests that fail are
 * tried again, {@link EventBridgeEventBusOptions.maxAttempts} times in all, with a growing pause.
 * What still fails is sent to the fallback queue ({@link EventBridgeEventBusOptions.fallback}), an
 * SQS queue that the dispatcher consumes as well: each message is the entry as EventBridge would
 * have handed it over (`{source, detail-type, detail}`), so it is dispatched the same way, only
 * later. Only an entry that neither EventBridge nor SQS takes after their tries is lost to routing
 * (the events stay stored, visible in the API and the stream); it is logged as an error naming the
 * events. `publish` never rejects, so a run whose events are stored is not retried and stored twice.
 */
import { setTimeout as sleepFor } from "node:timers/promises";
import { type EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from "@aws-sdk/client-eventbridge";
import { GetQueueUrlCommand, SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE } from "#config/shared-names";
import type { StoredEvent } from "#core/component-model";
import type { EmitterOwner, EventBus, StoredEventsDetail } from "#core/ports/event-bus";
import type { Logger } from "#core/ports/logger";
import { consecutiveBatches } from "./batches.ts";

/**
 * Largest entry (`Source` + `DetailType` + `Detail`, as EventBridge counts it). Below the 256 KB a
 * whole request may carry, with room for the envelope EventBridge adds when it invokes the target.
 */
export const MAX_ENTRY_BYTES = 200 * 1024;
/** Largest request: EventBridge wants the entries of one `PutEvents` under 256 KB in all. */
export const MAX_REQUEST_BYTES = 255 * 1024;
/** EventBridge's limit of entries per `PutEvents`. */
export const MAX_ENTRIES_PER_REQUEST = 10;

/**
 * Name of the fallback queue of the bus `busName` (`sluice-<stage>`): the stack names the queue so
 * (lib/constructs/event-fanout.ts), and functions that publish find its URL by that name.
 */

/** Where entries EventBridge keeps refusing are sent: an SQS queue the dispatcher consumes. */
export interface PublishFallback {
  readonly sqs: SQSClient;
  /** The queue's URL, or its name (its URL is then asked for once, on first use). */
  readonly queue: { url: string } | { name: string };
}

export interface EventBridgeEventBusOptions {
  readonly eventBridge: EventBridgeClient;
  /** Name of the custom bus (`SLUICE_EVENT_BUS_NAME`). */
  readonly busName: string;
  readonly log: Logger;
  /** Tries of an entry in all, the first included (the SDK's own retries come on top). @default 3 */
  readonly maxAttempts?: number;
  /** Pause before try n (2, 3, ...). @default 100 ms × 4^(n-2) */
  readonly backoffMs?: (attempt: number) => number;
  /** @default node:timers/promises setTimeout */
  readonly sleep?: (ms: number) => Promise<unknown>;
  /** Where what EventBridge still refuses after the last try goes; without it, it is only logged. */
  readonly fallback?: PublishFallback;
}

interface SizedEntry {
  entry: PutEventsRequestEntry;
  bytes: number;
  eventIds: string[];
}

const bytesOf = (text: string) => Buffer.byteLength(text, "utf8");
const FIXED_BYTES = bytesOf(EVENT_SOURCE) + bytesOf(EVENT_DETAIL_TYPE);

function sized(busName: string, detail: StoredEventsDetail, eventIds: string[]): SizedEntry {
  const text = JSON.stringify(detail);
  return {
    entry: { EventBusName: busName, Source: EVENT_SOURCE, DetailType: EVENT_DETAIL_TYPE, Detail: text },
    bytes: FIXED_BYTES + bytesOf(text),
    eventIds,
  };
}

/** The entries of one publish, in event order: consecutive events packed, oversized ones as references. */
export function toEntries(busName: string, events: readonly StoredEvent[], emitter: EmitterOwner): SizedEntry[] {
  const entries: SizedEntry[] = [];
  const sourceId = events[0]?.sourceId;
  if (sourceId === undefined) return entries;
  // Only the owner's two ids, whatever else the object given holds.
  const owner = { userId: emitter.userId, workspaceId: emitter.workspaceId };
  // `{"sourceId":"...","owner":{...},"events":[]}` and the entry's fixed fields; each event adds its JSON and a comma.
  const emptyBytes = FIXED_BYTES + bytesOf(JSON.stringify({ sourceId, owner, events: [] }));
  let pending: StoredEvent[] = [];
  let pendingBytes = emptyBytes;
  const flush = () => {
    if (pending.length === 0) return;
    entries.push(
      sized(
        busName,
        { sourceId, owner, events: pending },
        pending.map((event) => event.id),
      ),
    );
    pending = [];
    pendingBytes = emptyBytes;
  };
  for (const event of events) {
    const eventBytes = bytesOf(JSON.stringify(event));
    if (emptyBytes + eventBytes > MAX_ENTRY_BYTES) {
      flush();
      entries.push(sized(busName, { sourceId, owner, eventId: event.id, channel: event.channel }, [event.id]));
      continue;
    }
    const added = eventBytes + (pending.length > 0 ? 1 : 0);
    if (pendingBytes + added > MAX_ENTRY_BYTES) flush();
    pendingBytes += eventBytes + (pending.length > 0 ? 1 : 0);
    pending.push(event);
  }
  flush();
  return entries;
}

/** Entries grouped into requests of at most 10 entries and {@link MAX_REQUEST_BYTES}, order kept. */
export function toRequests<T extends { bytes: number }>(entries: readonly T[]): T[][] {
  return consecutiveBatches(entries, {
    maxItems: MAX_ENTRIES_PER_REQUEST,
    maxBytes: MAX_REQUEST_BYTES,
    sizeOf: (entry) => entry.bytes,
  });
}

export class EventBridgeEventBus implements EventBus {
  readonly #options: EventBridgeEventBusOptions;
  readonly #maxAttempts: number;
  #fallbackUrl: Promise<string> | undefined;

  constructor(options: EventBridgeEventBusOptions) {
    this.#options = options;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 3);
  }

  async publish(events: readonly StoredEvent[], owner: EmitterOwner): Promise<void> {
    const sourceId = events[0]?.sourceId;
    for (const request of toRequests(toEntries(this.#options.busName, events, owner))) {
      await this.#put(sourceId, request);
    }
  }

  #backoffMs(attempt: number): number {
    return this.#options.backoffMs?.(attempt) ?? 100 * 4 ** (attempt - 2);
  }

  #sleep(ms: number): Promise<unknown> {
    return (this.#options.sleep ?? sleepFor)(ms);
  }

  /** Puts one request's entries, trying the refused ones again; hands what never went through to the fallback. */
  async #put(sourceId: string | undefined, entries: SizedEntry[]): Promise<void> {
    const { eventBridge } = this.#options;
    let pending = entries;
    let lastError = "";
    for (let attempt = 1; attempt <= this.#maxAttempts && pending.length > 0; attempt++) {
      if (attempt > 1) await this.#sleep(this.#backoffMs(attempt));
      try {
        const output = await eventBridge.send(new PutEventsCommand({ Entries: pending.map(({ entry }) => entry) }));
        if (!output.FailedEntryCount) {
          pending = [];
          break;
        }
        // Results come in the order of the request's entries; one without a result counts as failed.
        const results = output.Entries ?? [];
        const failed = pending.filter((_, index) => results[index]?.EventId === undefined || results[index]?.ErrorCode);
        const error = results.find((result) => result.ErrorCode);
        lastError = error ? `${error.ErrorCode}: ${error.ErrorMessage ?? ""}` : "an entry has no result";
        pending = failed;
      } catch (error) {
        lastError = String(error);
      }
    }
    if (pending.length > 0) await this.#fallBack(sourceId, pending, lastError);
  }

  /** Sends entries EventBridge refused to the fallback queue, trying refused messages again; logs what is lost. */
  async #fallBack(sourceId: string | undefined, entries: SizedEntry[], busError: string): Promise<void> {
    const { fallback, log } = this.#options;
    const fields = { source_id: sourceId, attempts: this.#maxAttempts, error: busError };
    if (!fallback) {
      log.error("stored events could not be published on the event bus; their subscribers will not receive them", {
        ...fields,
        event_ids: entries.flatMap((entry) => entry.eventIds),
      });
      return;
    }
    let pending = entries.map((entry, index) => ({ entry, id: String(index) }));
    let lastError = "";
    for (let attempt = 1; attempt <= this.#maxAttempts && pending.length > 0; attempt++) {
      if (attempt > 1) await this.#sleep(this.#backoffMs(attempt));
      try {
        const output = await fallback.sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: await this.#fallbackQueueUrl(fallback),
            Entries: pending.map(({ entry, id }) => ({ Id: id, MessageBody: fallbackMessageOf(entry.entry) })),
          }),
        );
        const failed = new Set((output.Failed ?? []).map((failure) => failure.Id));
        lastError = (output.Failed ?? []).map((failure) => `${failure.Code}: ${failure.Message ?? ""}`).join("; ");
        pending = pending.filter(({ id }) => failed.has(id));
      } catch (error) {
        lastError = String(error);
      }
    }
    const queued = entries.length - pending.length;
    if (queued > 0) {
      log.warn("stored events were refused by the event bus and queued for the dispatcher instead", {
        ...fields,
        event_ids: entries.filter((entry) => !pending.some((left) => left.entry === entry)).flatMap((e) => e.eventIds),
      });
    }
    if (pending.length > 0) {
      log.error(
        "stored events could be neither published on the event bus nor queued for the dispatcher; their subscribers will not receive them",
        { ...fields, event_ids: pending.flatMap(({ entry }) => entry.eventIds), fallback_error: lastError },
      );
    }
  }

  #fallbackQueueUrl(fallback: PublishFallback): Promise<string> {
    const { queue } = fallback;
    if ("url" in queue) return Promise.resolve(queue.url);
    if (!this.#fallbackUrl) {
      const lookup = fallback.sqs.send(new GetQueueUrlCommand({ QueueName: queue.name })).then((output) => {
        if (!output.QueueUrl) throw new Error(`queue ${queue.name} has no URL`);
        return output.QueueUrl;
      });
      // A failed look-up is made again by the next use.
      lookup.catch(() => {
        if (this.#fallbackUrl === lookup) this.#fallbackUrl = undefined;
      });
      this.#fallbackUrl = lookup;
    }
    return this.#fallbackUrl;
  }
}

/** The message of an entry on the fallback queue: the entry as EventBridge hands it to the dispatcher. */
function fallbackMessageOf(entry: PutEventsRequestEntry): string {
  return `{"source":${JSON.stringify(entry.Source)},"detail-type":${JSON.stringify(entry.DetailType)},"detail":${entry.Detail}}`;
}
