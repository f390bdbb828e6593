import type { DeliveryRecord } from "#core/subscription-model";

/**
 * Durable hand-off of webhook deliveries from the dispatcher to the delivery worker. When
 * `enqueue` resolves, the deliveries survive a crash or restart. Adapters: `SqliteDeliveryQueue`
 * (local mode; a worker in the same process claims due deliveries) and `SqsDeliveryQueue` (AWS).
 * Deliveries of one webhook are attempted first in the order they were enqueued.
 */
export interface DeliveryQueue {
  enqueue(deliveries: readonly DeliveryRecord[]): Promise<void>;
}
