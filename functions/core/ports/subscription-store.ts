import type { Page, PageQuery } from "#core/pagination";
import type { AutoSubscriptionRecord, SubscriptionRecord, WebhookRecord } from "#core/subscription-model";

/** Which subscriptions and auto subscriptions to remove when a resource goes away. */
export interface SubscriptionStore {
  // Webhooks (`wh_`), newest first by id.
  createWebhook(webhook: WebhookRecord): Promise<void>;
  getWebhook(id: string): Promise<WebhookRecord | undefined>;
  /** Replaces a stored webhook (secret rotation). Throws a `not_found` DomainError when it is gone. */
  updateWebhook(webhook: WebhookRecord): Promise<void>;
  deleteWebhook(id: string): Promise<void>;
  listWebhooksOfUser(userId: string, page: PageQuery): Promise<Page<WebhookRecord>>;

  /**
   * Stores a subscription unless one with the same `emitterKey`, `listenerId` and `eventName`
   * exists; returns the stored one either way (creating twice never duplicates deliveries).
   */
  putSubscription(subscription: SubscriptionRecord): Promise<SubscriptionRecord>;
  /** Removes the subscription with that key; returns it, or undefined when there was none. */
  deleteSubscription(
    key: Pick<SubscriptionRecord, "emitterKey" | "listenerId" | "eventName">,
  ): Promise<SubscriptionRecord | undefined>;
  getSubscription(
    key: Pick<SubscriptionRecord, "emitterKey" | "listenerId" | "eventName">,
  ): Promise<SubscriptionRecord | undefined>;
  listSubscriptionsOfUser(userId: string, page: PageQuery): Promise<Page<SubscriptionRecord>>;
  listSubscriptionsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SubscriptionRecord>>;
  /**
   * The hot path of every emit: subscriptions whose `emitterKey` is one of `emitterKeys` and whose
   * `eventName` is `eventName`, in no particular order.
   */
  findSubscriptions(emitterKeys: readonly string[], eventName: string): Promise<SubscriptionRecord[]>;
  /** Removes every subscription whose emitter or listener is this id (a deleted source or webhook). */
  deleteSubscriptionsOf(resourceId: string): Promise<void>;

  /** Stores an auto subscription unless the same (userId, eventName, listenerId) exists; returns the stored one. */
  putAutoSubscription(auto: AutoSubscriptionRecord): Promise<AutoSubscriptionRecord>;
  listAutoSubscriptionsOfUser(userId: string): Promise<AutoSubscriptionRecord[]>;
  /** Removes auto subscriptions whose listener is this id. */
  deleteAutoSubscriptionsOf(listenerId: string): Promise<void>;
}
