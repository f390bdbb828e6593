import type { NewEvent, StoredEvent } from "#core/component-model";
import type { Page, PageQuery } from "#core/pagination";

export interface EventQuery extends PageQuery {
  /**
   * Only this channel (`""` = default, `$logs`, ...); when absent, every channel except the
   * reserved ones whose names start with `$`. Cursors are event ids.
   */
  channel?: string;
  /**
   * Whether `totalCount` is wanted. @default true. Polls and catch-up pass false: on DynamoDB
   * counting reads the whole partition (SQLite keeps the counts, so there it is one row read);
   * `totalCount` is then 0.
   */
  count?: boolean;
}

/** An inclusive range of one source's events, in (ms, n) id order. */
export interface EventRange {
  /** First id removed (inclusive); from the oldest when absent. */
  fromId?: string;
  /** Last id removed (inclusive); up to the newest event stored when the call is made when absent. */
  toId?: string;
  /** Only this channel (`""` = default); every channel, the reserved ones included, when absent. */
  channel?: string;
}

/** How long events are kept (docs/events.md "Retention"). */
export interface EventRetention {
  /** Events older than this are removed (by a sweep locally, by DynamoDB's TTL on AWS). 0 = forever. */
  maxAgeMs: number;
  /**
   * The newest this many events of each channel of a source are always kept; older ones beyond the
   * count are removed (local mode only, in the background). 0 = no count limit.
   */
  keepPerChannel: number;
}

/** Retention when none is configured: 30 days, no count limit (docs/events.md "Retention"). */
export const DEFAULT_EVENT_RETENTION: Readonly<EventRetention> = Object.freeze({
  maxAgeMs: 30 * 24 * 60 * 60 * 1000,
  keepPerChannel: 0,
});

/**
 * Events emitted by sources (and their `$logs` / `$errors`). Adapters: `SqliteEventStore`,
 * `DynamoDbEventStore`; both pass `test/contract/event-store.contract.ts`.
 */
export interface EventStore {
  /**
   * Stores events in the given order and assigns each an id `<ms>-<n>`: `ms` is `nowMs` or, if the
   * source already has an event at a later ms, that ms; `n` counts from 0 within one ms. Ids of
   * one source strictly increase in (ms, n) numeric order, even across concurrent appends.
   */
  appendEvents(sourceId: string, events: NewEvent[], nowMs: number): Promise<StoredEvent[]>;
  /** Newest first; `after`/`before` are event ids with `slicePage` semantics in (ms, n) order. */
  listEvents(sourceId: string, query: EventQuery): Promise<Page<StoredEvent>>;
  /**
   * Deletes a range of events. When the promise resolves, no later `listEvents` returns an event
   * of the range, but the space may be reclaimed later by {@link purgeDeletedEvents}. Events
   * appended after the call began are never affected (the range ends at the newest event that
   * existed then). Deleting a range that holds nothing is not an error. Reads made before it
   * resolves may show part of the range (SQLite removes it in chunks, oldest first).
   */
  deleteEvents(sourceId: string, range: EventRange): Promise<void>;
  /**
   * Physically removes what {@link deleteEvents} hid. Idempotent, safe to run concurrently with
   * appends and lists, and a no-op when nothing waits for removal.
   */
  purgeDeletedEvents(sourceId: string): Promise<void>;
  /** Removes every event of a source (source deletion). */
  deleteAllEvents(sourceId: string): Promise<void>;
}
