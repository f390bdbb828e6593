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
 * Delayed emits waiting for their time, durably (docs/events.md "Delayed emits"). Adapter:
 * `SqliteDelayedEmits` (local mode). AWS has none yet: a delayed emit is emitted at once there.
 */
export interface DelayedEmitStore {
  /** Resolves once the entries are durable. */
  add(entries: readonly DelayedEmit[]): Promise<void>;
  /** How many of a source's delayed emits wait. */
  countPending(sourceId: string): Promise<number>;
  /** The earliest entries due at `nowMs` or before, at most `limit`, earliest first. */
  due(nowMs: number, limit: number): Promise<DelayedEmit[]>;
  /** Forgets one entry (delivered). */
  remove(sourceId: string, inEventId: string): Promise<void>;
  /**
   * Forgets a source's entries whose `$in` ids lie in the inclusive range (cancelled); every entry
   * of the source when neither bound is given (the source was deleted).
   */
  removeRange(sourceId: string, fromId?: string, toId?: string): Promise<void>;
}
