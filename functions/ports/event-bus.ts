import type { StoredEvent } from "#core/component-model";

/**
 * Announces events once they are stored, for live streams and subscriptions. Adapters:
 * `InProcessEventBus` (local mode: the stream server and the dispatcher listen in this process)
 * and `EventBridgeEventBus` (AWS: `PutEvents` to the bus whose rule invokes the dispatcher; the
 * AWS live stream polls the store instead).
 */
export interface EventBus {
  /**
   * Called after `appendEvents`, with the events of one append, one source, in id order. Calls for
   * one source are made in id order. Never rejects because a listener failed.
   */
  publish(events: readonly StoredEvent[]): Promise<void>;
}
