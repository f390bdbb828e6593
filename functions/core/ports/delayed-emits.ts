import type { EmitMeta, Json } from "#runtime/protocol";

/**
 * One delayed emit (`this.$emit(event, {delivery_ts})`) waiting for its time. Its copy on the
 * source's `$in` channel (`inEventId`) is what a client lists and deletes to cancel it.
 */
export interface DelayedEmit {
  sourceId: string;
  /** The id of its `$in` event (`<ms>-<n>`). */
  inEventId: string;
  /** Epoch ms it is delivered at (`delivery_ts`). */
  dueMs: number;
  /** The channel it is emitted on when due (`""` = default). */
  channel: string;
  event: Json;
  /** The emit's options, `delivery_ts` left out. */
  meta: EmitMeta;
}

/**
 * Delayed emits waiting for their time, durably (docs/events.md "Delayed emits"). Adapters:
 * `SqliteDelayedEmits` (local mode, polled by a driver: {@link PolledDelayedEmitStore}) and
 * `SchedulerDelayedEmits` (AWS: rows in DynamoDB, one EventBridge Scheduler schedule each, which
 * invokes the deliverer with the entry's key at its time).
 */
export interface DelayedEmitStore {
  /** Resolves once the entries are durable and will be delivered at their time. */
  add(entries: readonly DelayedEmit[]): Promise<void>;
  /** How many of a source's delayed emits wait. */
  countPending(sourceId: string): Promise<number>;
  /** One waiting entry; undefined once it was delivered or cancelled. */
  get(sourceId: string, inEventId: string): Promise<DelayedEmit | undefined>;
  /** Forgets one entry (delivered). */
  remove(sourceId: string, inEventId: string): Promise<void>;
  /**
   * Forgets a source's entries whose `$in` ids lie in the inclusive range (cancelled); every entry
   * of the source when neither bound is given (the source was deleted). Resolves to the `$in` ids
   * of the entries it forgot.
   */
  removeRange(sourceId: string, fromId?: string, toId?: string): Promise<string[]>;
}

/** A store that finds what is due by itself, for a driver that polls it (local mode). */
export interface PolledDelayedEmitStore extends DelayedEmitStore {
  /** The earliest entries due at `nowMs` or before, at most `limit`, earliest first. */
  due(nowMs: number, limit: number): Promise<DelayedEmit[]>;
}
