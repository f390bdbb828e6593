import type { NewEvent, StoredEvent } from "#core/component-model";
import type { Page, PageQuery } from "#core/pagination";

export interface EventQuery extends PageQuery {
  /**
   * Only this channel (`""` = default, `$logs`, ...); when absent, every channel except the
   * reserved ones whose names start with `$`. Cursors are event ids.
   */
  channel?: string;
}

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
  /** Removes every event of a source (source deletion). */
  deleteAllEvents(sourceId: string): Promise<void>;
}
