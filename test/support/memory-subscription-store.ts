import { notFound } from "#core/errors";
import { type Page, type PageQuery, slicePage } from "#core/pagination";
import type {
  AutoSubscriptionRecord,
  DeadLetterRecord,
  SubscriptionRecord,
  WebhookRecord,
} from "#core/subscription-model";
import type { DeadLetterStore } from "#ports/dead-letter-store";
import type { SubscriptionStore } from "#ports/subscription-store";

/**
 * In-memory `SubscriptionStore` and `DeadLetterStore` for use-case tests, following the ports'
 * documented semantics (idempotent puts, newest-first lists by id, `slicePage` paging). Records
 * are copied in and out so a test cannot change what is stored by mutating an answer.
 */
const copy = <T>(value: T): T => structuredClone(value);
const newestFirst = <T extends { id: string }>(items: Iterable<T>) =>
  [...items].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
const pageOf = <T extends { id: string }>(items: Iterable<T>, page: PageQuery): Page<T> => {
  const found = slicePage(newestFirst(items), (item) => item.id, page);
  return { items: found.items.map(copy), totalCount: found.totalCount };
};

type SubscriptionKey = Pick<SubscriptionRecord, "emitterKey" | "listenerId" | "eventName">;
const keyOf = (key: SubscriptionKey) => JSON.stringify([key.emitterKey, key.listenerId, key.eventName]);

export class MemorySubscriptionStore implements SubscriptionStore {
  readonly webhooks = new Map<string, WebhookRecord>();
  readonly subscriptions = new Map<string, SubscriptionRecord>();
  readonly autos = new Map<string, AutoSubscriptionRecord>();

  async createWebhook(webhook: WebhookRecord) {
    if (this.webhooks.has(webhook.id)) throw new Error(`webhook ${webhook.id} exists`);
    this.webhooks.set(webhook.id, copy(webhook));
  }
  async getWebhook(id: string) {
    const found = this.webhooks.get(id);
    return found && copy(found);
  }
  async updateWebhook(webhook: WebhookRecord) {
    if (!this.webhooks.has(webhook.id)) throw notFound("webhook");
    this.webhooks.set(webhook.id, copy(webhook));
  }
  async deleteWebhook(id: string) {
    this.webhooks.delete(id);
  }
  async listWebhooksOfUser(userId: string, page: PageQuery) {
    return pageOf(
      [...this.webhooks.values()].filter((w) => w.userId === userId),
      page,
    );
  }

  async putSubscription(subscription: SubscriptionRecord) {
    const key = keyOf(subscription);
    const existing = this.subscriptions.get(key);
    if (existing) return copy(existing);
    this.subscriptions.set(key, copy(subscription));
    return copy(subscription);
  }
  async deleteSubscription(key: SubscriptionKey) {
    const existing = this.subscriptions.get(keyOf(key));
    this.subscriptions.delete(keyOf(key));
    return existing && copy(existing);
  }
  async getSubscription(key: SubscriptionKey) {
    const existing = this.subscriptions.get(keyOf(key));
    return existing && copy(existing);
  }
  async listSubscriptionsOfUser(userId: string, page: PageQuery) {
    return pageOf(
      [...this.subscriptions.values()].filter((s) => s.userId === userId),
      page,
    );
  }
  async listSubscriptionsOfWorkspace(workspaceId: string, page: PageQuery) {
    return pageOf(
      [...this.subscriptions.values()].filter((s) => s.workspaceId === workspaceId),
      page,
    );
  }
  async findSubscriptions(emitterKeys: readonly string[], eventName: string) {
    return [...this.subscriptions.values()]
      .filter((s) => emitterKeys.includes(s.emitterKey) && s.eventName === eventName)
      .map(copy);
  }
  async deleteSubscriptionsOf(resourceId: string) {
    for (const [key, s] of this.subscriptions) {
      if (s.emitterId === resourceId || s.emitterKey === resourceId || s.listenerId === resourceId) {
        this.subscriptions.delete(key);
      }
    }
  }

  async putAutoSubscription(auto: AutoSubscriptionRecord) {
    const key = JSON.stringify([auto.userId, auto.eventName, auto.listenerId]);
    const existing = this.autos.get(key);
    if (existing) return copy(existing);
    this.autos.set(key, copy(auto));
    return copy(auto);
  }
  async listAutoSubscriptionsOfUser(userId: string) {
    return [...this.autos.values()].filter((a) => a.userId === userId).map(copy);
  }
  async deleteAutoSubscriptionsOf(listenerId: string) {
    for (const [key, auto] of this.autos) if (auto.listenerId === listenerId) this.autos.delete(key);
  }
}

export class MemoryDeadLetterStore implements DeadLetterStore {
  readonly letters = new Map<string, DeadLetterRecord>();

  async putDeadLetter(deadLetter: DeadLetterRecord) {
    this.letters.set(`${deadLetter.webhookId}/${deadLetter.id}`, copy(deadLetter));
  }
  async getDeadLetter(webhookId: string, id: string) {
    const found = this.letters.get(`${webhookId}/${id}`);
    return found && copy(found);
  }
  async listDeadLetters(webhookId: string, page: PageQuery) {
    return pageOf(
      [...this.letters.values()].filter((d) => d.webhookId === webhookId),
      page,
    );
  }
  async deleteDeadLetter(webhookId: string, id: string) {
    return this.letters.delete(`${webhookId}/${id}`);
  }
  async deleteDeadLettersOf(webhookId: string) {
    for (const [key, d] of this.letters) if (d.webhookId === webhookId) this.letters.delete(key);
  }
}
