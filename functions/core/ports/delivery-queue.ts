import type { DeliveryRecord } from "#core/subscription-model";

/**
 * Durable hand-off of webhook deliveries from the dispatcher to the delivery worker. When
 * `enqueue` resolves, the deliveries survive a crash or restart. Adapters: `SqliteDeliveryQueue`
 * (local mode; a worker in the same process claims due deliveries) and `SqsDeliveryQueue` (AWS).
 * Deliveries of one webhook are attempted first in the order they were enqueued.
 */
export interface DeliveryQueue {
  /**
   * Queues the deliveries, in order. A delivery whose id the queue already holds is not queued a
   * second time (a dispatch made again derives the same ids: `deliveryIdFor` of `#core/dispatcher`):
   * SQLite keeps the row it has; SQS FIFO drops a repeat within its 5-minute deduplication window.
   */
  enqueue(deliveries: readonly DeliveryRecord[]): Promise<void>;
}
