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
 * tried again, {@link EventBridgeEventBusOptions.maxAttempts} times in all; what still fails is
 * logged as an error and not published. The events stay stored (and visible in the API and the
 * stream) but their subscribers do not receive them: there is no outbox (docs/aws.md). `publish`
 * never rejects, so a run whose events are stored is not retried and stored twice.
 */
import { setTimeout as sleepFor } from "node:timers/promises";
import { type EventBridgeClient, PutEventsCommand, type PutEventsRequestEntry } from "@aws-sdk/client-eventbridge";
import type { StoredEvent } from "#core/component-model";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE, type StoredEventsDetail } from "#internal/event-dispatcher";
import type { EmitterOwner, EventBus } from "#ports/event-bus";
import type { Logger } from "#ports/logger";
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

  /** Puts one request's entries, trying the refused ones again; logs what never went through. */
  async #put(sourceId: string | undefined, entries: SizedEntry[]): Promise<void> {
    const { eventBridge, log } = this.#options;
    const backoffMs = this.#options.backoffMs ?? ((attempt: number) => 100 * 4 ** (attempt - 2));
    const sleep = this.#options.sleep ?? sleepFor;
    let pending = entries;
    let lastError = "";
    for (let attempt = 1; attempt <= this.#maxAttempts && pending.length > 0; attempt++) {
      if (attempt > 1) await sleep(backoffMs(attempt));
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
    if (pending.length > 0) {
      log.error("stored events could not be published on the event bus; their subscribers will not receive them", {
        source_id: sourceId,
        event_ids: pending.flatMap((entry) => entry.eventIds),
        attempts: this.#maxAttempts,
        error: lastError,
      });
    }
  }
}
