import type { SourceRecord, StoredEvent } from "#core/component-model";

/**
 * The owner of the source whose events are published: what its `dc_*` and workspace `$errors`
 * subscriptions are found by (`emitterKeys` in `#core/dispatcher`). The publisher holds the source
 * already, so the dispatcher need not read it again.
 */
export type EmitterOwner = Pick<SourceRecord, "userId" | "workspaceId">;

/**
 * The `detail` of an entry a bus publishes (on AWS, an EventBridge entry the dispatcher reads):
 * one append's events inline, or a reference to one event too large to travel inline.
 */
export type StoredEventsDetail =
  | { sourceId: string; owner: EmitterOwner; events: readonly StoredEvent[] }
  | { sourceId: string; owner: EmitterOwner; eventId: string; channel: string };

/**
 * Announces events once they are stored, for live streams and subscriptions. Adapters:
 * `InProcessEventBus` (local mode: the stream server and the dispatcher listen in this process;
 * the append's outbox row makes routing survive a crash, sqlite-outbox.ts) and
 * `EventBridgeEventBus` (AWS: `PutEvents` to the bus whose rule invokes the dispatcher, with an SQS
 * queue the dispatcher also consumes for entries EventBridge keeps refusing; the AWS live stream
 * polls the store instead).
 */
export interface EventBus {
  /**
   * Called after `appendEvents`, with the events of one append, one source, in id order, and that
   * source's owner. Calls for one source are made in id order. Never rejects because a listener
   * failed, nor because routing could not be handed over (the events are stored already: a retried
   * run would store them twice).
   */
  publish(events: readonly StoredEvent[], owner: EmitterOwner): Promise<void>;
}
