import { type DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { conflict, notFound } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import type { SubscriptionStore } from "#core/ports/subscription-store";
import type {
  AutoSubscriptionRecord,
  EmitterKind,
  ListenerKind,
  SubscriptionRecord,
  WebhookRecord,
} from "#core/subscription-model";
import { failedConditionIndexes, isTransactionConflict } from "./dynamodb-errors.ts";
import { collectionQuery, type Item, newestFirstPage, queryAll } from "./dynamodb-paging.ts";
import {
  type Key,
  lostToConcurrentWriter,
  pauseBeforeRetry,
  type TransactItem,
  transactDelete,
  transactPut,
  transactWrite,
} from "./dynamodb-transactions.ts";
import { SUBSCRIPTION_SORT_KEY_PREFIX, subscriptionKeys } from "./subscription-keys.ts";

type SubscriptionKey = Pick<SubscriptionRecord, "emitterKey" | "listenerId" | "eventName">;

/** Subscriptions of a deleted resource removed at once (one transaction each). */
const DELETE_CONCURRENCY = 8;

const webhookAttributes = (webhook: WebhookRecord): Item => ({
  id: webhook.id,
  userId: webhook.userId,
  workspaceId: webhook.workspaceId,
  url: webhook.url,
  name: webhook.name,
  description: webhook.description,
  sealedSigningSecret: webhook.sealedSigningSecret,
  createdAt: webhook.createdAt,
  updatedAt: webhook.updatedAt,
});

const toWebhook = (item: Item): WebhookRecord => ({
  id: String(item.id),
  userId: String(item.userId),
  workspaceId: String(item.workspaceId),
  url: String(item.url),
  name: String(item.name),
  description: String(item.description),
  sealedSigningSecret: String(item.sealedSigningSecret),
  createdAt: Number(item.createdAt),
  updatedAt: Number(item.updatedAt),
});

const subscriptionAttributes = (subscription: SubscriptionRecord): Item => ({
  id: subscription.id,
  userId: subscription.userId,
  workspaceId: subscription.workspaceId,
  emitterId: subscription.emitterId,
  emitterKind: subscription.emitterKind,
  emitterKey: subscription.emitterKey,
  listenerId: subscription.listenerId,
  listenerKind: subscription.listenerKind,
  eventName: subscription.eventName,
  createdAt: subscription.createdAt,
});

const toSubscription = (item: Item): SubscriptionRecord => ({
  id: String(item.id),
  userId: String(item.userId),
  workspaceId: String(item.workspaceId),
  emitterId: String(item.emitterId),
  emitterKind: String(item.emitterKind) as EmitterKind,
  emitterKey: String(item.emitterKey),
  listenerId: String(item.listenerId),
  listenerKind: String(item.listenerKind) as ListenerKind,
  eventName: String(item.eventName),
  createdAt: Number(item.createdAt),
});

const autoAttributes = (auto: AutoSubscriptionRecord): Item => ({
  id: auto.id,
  userId: auto.userId,
  workspaceId: auto.workspaceId,
  eventName: auto.eventName,
  listenerId: auto.listenerId,
  listenerKind: auto.listenerKind,
  createdAt: auto.createdAt,
});

const toAuto = (item: Item): AutoSubscriptionRecord => ({
  id: String(item.id),
  userId: String(item.userId),
  workspaceId: String(item.workspaceId),
  eventName: String(item.eventName),
  listenerId: String(item.listenerId),
  listenerKind: String(item.listenerKind) as ListenerKind,
  createdAt: Number(item.createdAt),
});

const subscriptionKey = (key: SubscriptionKey) =>
  subscriptionKeys.subscription(key.emitterKey, key.eventName, key.listenerId);

/** The items of a subscription besides its record: the copies each list and cascade reads. */
const subscriptionCopyKeys = (subscription: SubscriptionRecord) => [
  { ...subscriptionKeys.subscriptionOfUser(subscription.userId, subscription.id), type: "subscriptionOfUser" },
  {
    ...subscriptionKeys.subscriptionOfWorkspace(subscription.workspaceId, subscription.id),
    type: "subscriptionOfWorkspace",
  },
  {
    ...subscriptionKeys.subscriptionOfListener(subscription.listenerId, subscription.id),
    type: "subscriptionOfListener",
  },
];

const autoKey = (auto: AutoSubscriptionRecord) =>
  subscriptionKeys.autoSubscription(auto.userId, auto.eventName, auto.listenerId);

/** Runs `tasks` with at most `limit` of them in flight. */
async function inBatches<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  for (let start = 0; start < items.length; start += limit) {
    await Promise.all(items.slice(start, start + limit).map(task));
  }
}

/**
 * `SubscriptionStore` on the DynamoDB resources table (docs/table-design.md, "Webhooks, subscriptions and dead letters").
 *
 * A subscription's record lives in its emitter's partition under a key made of its event name and
 * listener, so the key is its own uniqueness guard and the emit path is one Query per emitter key.
 * Copies in the user's, the workspace's and the listener's collections serve the lists and the
 * cascade on a deleted listener. Record and copies are written and deleted in one transaction;
 * the record is put with `attribute_not_exists(pk)`, and a put that finds it taken returns the
 * stored one, so concurrent identical puts all return the first. Auto subscriptions follow the
 * same scheme (record in the user's collection, copy under the listener); webhooks are a record
 * and a copy in the user's collection.
 */
export class DynamoDbSubscriptionStore implements SubscriptionStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async createWebhook(webhook: WebhookRecord): Promise<void> {
    const attributes = webhookAttributes(webhook);
    try {
      await this.transact([
        this.put(
          { ...subscriptionKeys.webhook(webhook.id), type: "webhook", ...attributes },
          "attribute_not_exists(pk)",
        ),
        this.put(
          { ...subscriptionKeys.webhookOfUser(webhook.userId, webhook.id), type: "webhookOfUser", ...attributes },
          "attribute_not_exists(pk)",
        ),
      ]);
    } catch (error) {
      if (failedConditionIndexes(error).length > 0) throw conflict(`webhook ${webhook.id} exists already`);
      throw error;
    }
  }

  async getWebhook(id: string): Promise<WebhookRecord | undefined> {
    const item = await this.get(subscriptionKeys.webhook(id));
    return item && toWebhook(item);
  }

  async updateWebhook(webhook: WebhookRecord): Promise<void> {
    const attributes = webhookAttributes(webhook);
    for (let attempt = 1; ; attempt++) {
      const stored = await this.get(subscriptionKeys.webhook(webhook.id));
      if (!stored) throw notFound(`webhook ${webhook.id}`);
      // Conditioned on the owner read, so the copy that goes (if the owner changes) is the right one.
      const writes = [
        this.put({ ...subscriptionKeys.webhook(webhook.id), type: "webhook", ...attributes }, "userId = :userId", {
          ":userId": stored.userId,
        }),
        this.put({
          ...subscriptionKeys.webhookOfUser(webhook.userId, webhook.id),
          type: "webhookOfUser",
          ...attributes,
        }),
      ];
      if (stored.userId !== webhook.userId) {
        writes.push(this.delete(subscriptionKeys.webhookOfUser(String(stored.userId), webhook.id)));
      }
      try {
        await this.transact(writes);
        return;
      } catch (error) {
        if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
  }

  async deleteWebhook(id: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const stored = await this.get(subscriptionKeys.webhook(id));
      if (!stored) return;
      try {
        await this.transact([
          this.delete(subscriptionKeys.webhook(id), "userId = :userId", { ":userId": stored.userId }),
          this.delete(subscriptionKeys.webhookOfUser(String(stored.userId), id)),
        ]);
        return;
      } catch (error) {
        if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
  }

  async listWebhooksOfUser(userId: string, page: PageQuery): Promise<Page<WebhookRecord>> {
    const pk = subscriptionKeys.webhookOfUser(userId, "").pk;
    const { items, totalCount } = await newestFirstPage(
      this.client,
      this.tableName,
      pk,
      SUBSCRIPTION_SORT_KEY_PREFIX.webhook,
      page,
    );
    return { items: items.map(toWebhook), totalCount };
  }

  async putSubscription(subscription: SubscriptionRecord): Promise<SubscriptionRecord> {
    const attributes = subscriptionAttributes(subscription);
    const key = subscriptionKey(subscription);
    const writes = [
      this.put({ ...key, type: "subscription", ...attributes }, "attribute_not_exists(pk)"),
      ...subscriptionCopyKeys(subscription).map((copy) =>
        this.put({ ...copy, ...attributes }, "attribute_not_exists(pk)"),
      ),
    ];
    return this.putGuarded(writes, key, toSubscription, `subscription ${subscription.id}`);
  }

  async deleteSubscription(key: SubscriptionKey): Promise<SubscriptionRecord | undefined> {
    for (let attempt = 1; ; attempt++) {
      const stored = await this.get(subscriptionKey(key));
      if (!stored) return undefined;
      const subscription = toSubscription(stored);
      try {
        await this.transact(this.subscriptionDeletes(subscription));
        return subscription;
      } catch (error) {
        // Deleted (or replaced by a new subscription) meanwhile: read again.
        if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
  }

  async getSubscription(key: SubscriptionKey): Promise<SubscriptionRecord | undefined> {
    const item = await this.get(subscriptionKey(key));
    return item && toSubscription(item);
  }

  async listSubscriptionsOfUser(userId: string, page: PageQuery): Promise<Page<SubscriptionRecord>> {
    return this.subscriptionPage(subscriptionKeys.subscriptionOfUser(userId, "").pk, page);
  }

  async listSubscriptionsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SubscriptionRecord>> {
    return this.subscriptionPage(subscriptionKeys.subscriptionOfWorkspace(workspaceId, "").pk, page);
  }

  // Strongly consistent: an event emitted right after a subscription was made must reach it.
  async findSubscriptions(emitterKeys: readonly string[], eventName: string): Promise<SubscriptionRecord[]> {
    const prefix = subscriptionKeys.subscriptionsOfChannel(eventName);
    const found = await Promise.all(
      [...new Set(emitterKeys)].map((emitterKey) =>
        queryAll(this.client, collectionQuery(this.tableName, subscriptionKeys.emitterPartition(emitterKey), prefix)),
      ),
    );
    return found.flat().map(toSubscription);
  }

  async deleteSubscriptionsOf(resourceId: string): Promise<void> {
    const prefix = SUBSCRIPTION_SORT_KEY_PREFIX.subscription;
    const [asEmitter, asListener] = await Promise.all([
      queryAll(this.client, collectionQuery(this.tableName, subscriptionKeys.emitterPartition(resourceId), prefix)),
      queryAll(
        this.client,
        collectionQuery(this.tableName, subscriptionKeys.subscriptionOfListener(resourceId, "").pk, prefix),
      ),
    ]);
    const byId = new Map([...asEmitter, ...asListener].map((item) => [String(item.id), toSubscription(item)]));
    await inBatches([...byId.values()], DELETE_CONCURRENCY, (subscription) =>
      this.deleteExactly(this.subscriptionDeletes(subscription)),
    );
  }

  async putAutoSubscription(auto: AutoSubscriptionRecord): Promise<AutoSubscriptionRecord> {
    const attributes = autoAttributes(auto);
    const key = autoKey(auto);
    const writes = [
      this.put({ ...key, type: "autoSubscription", ...attributes }, "attribute_not_exists(pk)"),
      this.put(
        {
          ...subscriptionKeys.autoSubscriptionOfListener(auto.listenerId, auto.id),
          type: "autoSubscriptionOfListener",
          ...attributes,
        },
        "attribute_not_exists(pk)",
      ),
    ];
    return this.putGuarded(writes, key, toAuto, `auto subscription ${auto.id}`);
  }

  async listAutoSubscriptionsOfUser(userId: string): Promise<AutoSubscriptionRecord[]> {
    const pk = subscriptionKeys.autoSubscription(userId, "", "").pk;
    const items = await queryAll(
      this.client,
      collectionQuery(this.tableName, pk, SUBSCRIPTION_SORT_KEY_PREFIX.autoSubscription),
    );
    // Stored by (event name, listener); listed in creation order like SQLite.
    return items.map(toAuto).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async deleteAutoSubscriptionsOf(listenerId: string): Promise<void> {
    const pk = subscriptionKeys.autoSubscriptionOfListener(listenerId, "").pk;
    const copies = await queryAll(
      this.client,
      collectionQuery(this.tableName, pk, SUBSCRIPTION_SORT_KEY_PREFIX.autoSubscription),
    );
    await inBatches(copies.map(toAuto), DELETE_CONCURRENCY, (auto) =>
      this.deleteExactly([
        this.delete(autoKey(auto), "id = :id", { ":id": auto.id }),
        this.delete(subscriptionKeys.autoSubscriptionOfListener(auto.listenerId, auto.id)),
      ]),
    );
  }

  /**
   * Writes a record (item 0, its own uniqueness guard) with its copies. When the guard is taken,
   * returns the record stored under it; when one of the copies is taken, the id is in use.
   */
  private async putGuarded<T>(writes: TransactItem[], key: Key, map: (item: Item) => T, what: string): Promise<T> {
    const written = (writes[0] as { Put: { Item: Item } }).Put.Item;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.transact(writes);
        return map(written);
      } catch (error) {
        const failed = failedConditionIndexes(error);
        if (failed.includes(0)) {
          const stored = await this.get(key);
          if (stored) return map(stored);
          // Deleted between our write and our read: try to write it again.
        } else if (failed.length > 0) {
          throw conflict(`${what} exists already`);
        } else if (!isTransactionConflict(error)) {
          throw error;
        }
        if (!(await pauseBeforeRetry(true, attempt))) throw error;
      }
    }
  }

  /** The deletes of a subscription's record (only if it is still this one) and its copies. */
  private subscriptionDeletes(subscription: SubscriptionRecord): TransactItem[] {
    return [
      this.delete(subscriptionKey(subscription), "id = :id", { ":id": subscription.id }),
      ...subscriptionCopyKeys(subscription).map(({ pk, sk }) => this.delete({ pk, sk })),
    ];
  }

  /**
   * Deletes a record and its copies, the record conditioned on its id. A failed condition means
   * another writer deleted the record, and with it these copies, in its own transaction: done.
   */
  private async deleteExactly(writes: TransactItem[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.transact(writes);
        return;
      } catch (error) {
        if (failedConditionIndexes(error).includes(0)) return;
        if (!(await pauseBeforeRetry(isTransactionConflict(error), attempt))) throw error;
      }
    }
  }

  private async subscriptionPage(pk: string, page: PageQuery): Promise<Page<SubscriptionRecord>> {
    const prefix = SUBSCRIPTION_SORT_KEY_PREFIX.subscription;
    const { items, totalCount } = await newestFirstPage(this.client, this.tableName, pk, prefix, page);
    return { items: items.map(toSubscription), totalCount };
  }

  private async get(Key: Key): Promise<Item | undefined> {
    const { Item } = await this.client.send(new GetCommand({ TableName: this.tableName, Key, ConsistentRead: true }));
    return Item;
  }

  private put(Item: Item, condition?: string, values?: Item): TransactItem {
    return transactPut(this.tableName, Item, condition, values);
  }

  private delete(Key: Key, condition?: string, values?: Item): TransactItem {
    return transactDelete(this.tableName, Key, condition, values);
  }

  private async transact(TransactItems: TransactItem[]): Promise<void> {
    await transactWrite(this.client, TransactItems);
  }
}
