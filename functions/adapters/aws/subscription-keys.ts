/**
 * Keys of the routing items (webhooks, subscriptions, auto subscriptions, dead letters) on the
 * resources table; docs/table-design.md ("Webhooks, subscriptions and dead letters") explains them. Same conventions as
 * `table-design.ts`: generic `pk`/`sk` strings, `<KIND>#<id>`, adapters never spell a key.
 */

/**
 * A free-form part of a sort key followed by another part: `%` and `#` are percent-encoded, so the
 * encoded part holds no `#` and `begins_with(sk, "SUB#<part>#")` matches that part exactly (an
 * event name `a` must not match the subscriptions of `a#b`).
 */
function keyPart(text: string): string {
  return text.replaceAll("%", "%25").replaceAll("#", "%23");
}

const emitterPartition = (emitterKey: string) => `EMIT#${emitterKey}`;

export const subscriptionKeys = {
  /** A webhook record. */
  webhook: (webhookId: string) => ({ pk: `WH#${webhookId}`, sk: "WH" }),
  /** Copy of a webhook in its user's collection. */
  webhookOfUser: (userId: string, webhookId: string) => ({ pk: `USER#${userId}`, sk: `WH#${webhookId}` }),

  /**
   * A subscription record, which is also the guard of its (emitterKey, eventName, listenerId):
   * one partition per emitter, so the emit path is one Query per emitter key (prefix
   * `subscriptionsOfChannel`) and a deleted emitter's subscriptions are one Query.
   */
  subscription: (emitterKey: string, eventName: string, listenerId: string) => ({
    pk: emitterPartition(emitterKey),
    sk: `SUB#${keyPart(eventName)}#${listenerId}`,
  }),
  /** The partition of an emitter's subscriptions, by its `emitterKey`. */
  emitterPartition,
  /** The sort key prefix of an emitter's subscriptions to one channel. */
  subscriptionsOfChannel: (eventName: string) => `SUB#${keyPart(eventName)}#`,
  subscriptionOfUser: (userId: string, subscriptionId: string) => ({
    pk: `USER#${userId}`,
    sk: `SUB#${subscriptionId}`,
  }),
  subscriptionOfWorkspace: (workspaceId: string, subscriptionId: string) => ({
    pk: `WS#${workspaceId}`,
    sk: `SUB#${subscriptionId}`,
  }),
  /** Copy under the listener, so a deleted listener's subscriptions are one Query. */
  subscriptionOfListener: (listenerId: string, subscriptionId: string) => ({
    pk: `LISTENER#${listenerId}`,
    sk: `SUB#${subscriptionId}`,
  }),

  /** An auto subscription record and the guard of its (userId, eventName, listenerId). */
  autoSubscription: (userId: string, eventName: string, listenerId: string) => ({
    pk: `USER#${userId}`,
    sk: `AUTO#${keyPart(eventName)}#${listenerId}`,
  }),
  autoSubscriptionOfListener: (listenerId: string, autoId: string) => ({
    pk: `LISTENER#${listenerId}`,
    sk: `AUTO#${autoId}`,
  }),

  /** A dead letter, in its webhook's partition, sorted by delivery id. */
  deadLetter: (webhookId: string, deliveryId: string) => ({ pk: `DLQ#${webhookId}`, sk: `DL#${deliveryId}` }),
} as const;

export const SUBSCRIPTION_SORT_KEY_PREFIX = {
  webhook: "WH#",
  subscription: "SUB#",
  autoSubscription: "AUTO#",
  deadLetter: "DL#",
} as const;

/**
 * A dead letter holds the delivery's payload (an event of at most 256 KB plus its metadata) as a
 * JSON string; above this the write is refused with `payload_too_large` (items hold 400 KB).
 */
export const MAX_STORED_DEAD_LETTER_BYTES = 390 * 1024;
