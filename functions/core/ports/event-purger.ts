/**
 * Physical removal of deleted events, after `DELETE /sources/{id}/events` has answered 202.
 * Adapters: local mode calls the store directly (SQLite deletes at once, so its purge is a no-op),
 * and `LambdaEventPurger` (AWS: an asynchronous `Invoke` of the event-purger function). Either way the
 * job ends in `EventStore.purgeDeletedEvents(sourceId)`, which is idempotent.
 */
export interface EventPurger {
  purgeLater(sourceId: string): Promise<void>;
}
