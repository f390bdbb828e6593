import type { SourceRecord, StoredEvent } from "#core/component-model";

/**
 * The owner of the source whose events are published: what its `dc_*` and workspace `$errors`
 * subscriptions are found by (`emitterKeys` in `#core/dispatcher`). The publisher holds the source
 * already, so the dispatcher need not read it again.
 */
export type EmitterOwner = Pick<SourceRecord, "userId" | "workspaceId">;

/**
 * Announces events once they are stored, for live streams and subscriptions. Adapters:
 * `InProcessEventBus` (local mode: the stream server and the dispatcher listen in this process)
 * and `EventBridgeEventBus` (AWS: `PutEvents` to the bus whose rule invokes the dispatcher; the
 * AWS live stream polls the store instead).
 */
export interface EventBus {
  /**
   * Called after `appendEvents`, with the events of one append, one source, in id order, and that
   * source's owner. Calls for one source are made in id order. Never rejects because a listener
   * failed.
   */
  publish(events: readonly StoredEvent[], owner: EmitterOwner): Promise<void>;
}
