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
import { type SqliteDatabase, violatedConstraint } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";
import { SqliteReadCache } from "./sqlite-read-cache.ts";

interface WebhookRow {
  id: string;
  user_id: string;
  workspace_id: string;
  url: string;
  name: string;
  description: string;
  sealed_signing_secret: string;
  created_at: number;
  updated_at: number;
}

interface SubscriptionRow {
  id: string;
  user_id: string;
  workspace_id: string;
  emitter_id: string;
  emitter_kind: string;
  emitter_key: string;
  listener_id: string;
  listener_kind: string;
  event_name: string;
  created_at: number;
}

interface AutoSubscriptionRow {
  id: string;
  user_id: string;
  workspace_id: string;
  event_name: string;
  listener_id: string;
  listener_kind: string;
  created_at: number;
}

const toWebhook = (row: WebhookRow): WebhookRecord => ({
  id: row.id,
  userId: row.user_id,
  workspaceId: row.workspace_id,
  url: row.url,
  name: row.name,
  description: row.description,
  sealedSigningSecret: row.sealed_signing_secret,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const toSubscription = (row: SubscriptionRow): SubscriptionRecord => ({
  id: row.id,
  userId: row.user_id,
  workspaceId: row.workspace_id,
  emitterId: row.emitter_id,
  emitterKind: row.emitter_kind as EmitterKind,
  emitterKey: row.emitter_key,
  listenerId: row.listener_id,
  listenerKind: row.listener_kind as ListenerKind,
  eventName: row.event_name,
  createdAt: row.created_at,
});

const toAutoSubscription = (row: AutoSubscriptionRow): AutoSubscriptionRecord => ({
  id: row.id,
  userId: row.user_id,
  workspaceId: row.workspace_id,
  eventName: row.event_name,
  listenerId: row.listener_id,
  listenerKind: row.listener_kind as ListenerKind,
  createdAt: row.created_at,
});

type SubscriptionKey = Pick<SubscriptionRecord, "emitterKey" | "listenerId" | "eventName">;

/**
 * `SubscriptionStore` on the local SQLite file (tables in `sqlite-subscription-schema.ts`).
 * Uniqueness of a subscription's (emitter_key, event_name, listener_id) and of an auto
 * subscription's (user_id, event_name, listener_id) is a UNIQUE index: a put inserts with
 * `ON CONFLICT DO NOTHING` and reads the stored row back in the same IMMEDIATE transaction, so
 * concurrent puts (even from two processes on the same file) all return the first one. That index
 * also serves the emit path, `emitter_key IN (...) AND event_name = ?`.
 *
 * The emit path's results (`findSubscriptions`, mostly empty ones) are cached in process, by
 * emitter keys and event name, and so are the webhooks every delivery attempt reads (`getWebhook`),
 * at most `cacheSize` of each (see `SqliteReadCache`): every write
 * of this store empties the cache first, and a commit by another connection to the file is seen
 * from the next turn of the event loop. The subscription tables are written by this store only.
 */
export class SqliteSubscriptionStore implements SubscriptionStore {
  private readonly statements;
  private readonly cache;
  /** `findSubscriptions` results, frozen, by `JSON.stringify([eventName, ...emitterKeys])`. */
  private readonly found;
  /** `getWebhook` results, frozen, by id: read by every delivery attempt (null: no such webhook). */
  private readonly webhooks;

  constructor(
    private readonly db: SqliteDatabase,
    options: { cacheSize?: number } = {},
  ) {
    this.cache = new SqliteReadCache(db, options.cacheSize);
    this.found = this.cache.map<readonly SubscriptionRecord[]>();
    this.webhooks = this.cache.map<WebhookRecord | null>();
    this.statements = {
      insertWebhook: db.prepare(
        `INSERT INTO webhooks (id, user_id, workspace_id, url, name, description, sealed_signing_secret, created_at, updated_at)
         VALUES (@id, @userId, @workspaceId, @url, @name, @description, @sealedSigningSecret, @createdAt, @updatedAt)`,
      ),
      updateWebhook: db.prepare(
        `UPDATE webhooks SET user_id = @userId, workspace_id = @workspaceId, url = @url, name = @name,
           description = @description, sealed_signing_secret = @sealedSigningSecret, created_at = @createdAt,
           updated_at = @updatedAt
         WHERE id = @id`,
      ),
      webhookById: db.prepare<[string], WebhookRow>("SELECT * FROM webhooks WHERE id = ?"),
      deleteWebhook: db.prepare<[string]>("DELETE FROM webhooks WHERE id = ?"),
      webhooksOfUser: pageStatements<WebhookRow>(db, "webhooks", "user_id"),

      insertSubscription: db.prepare(
        `INSERT INTO subscriptions (id, user_id, workspace_id, emitter_id, emitter_kind, emitter_key, listener_id, listener_kind, event_name, created_at)
         VALUES (@id, @userId, @workspaceId, @emitterId, @emitterKind, @emitterKey, @listenerId, @listenerKind, @eventName, @createdAt)
         ON CONFLICT (emitter_key, event_name, listener_id) DO NOTHING`,
      ),
      subscriptionByKey: db.prepare<[string, string, string], SubscriptionRow>(
        "SELECT * FROM subscriptions WHERE emitter_key = ? AND event_name = ? AND listener_id = ?",
      ),
      deleteSubscriptionByKey: db.prepare<[string, string, string], SubscriptionRow>(
        "DELETE FROM subscriptions WHERE emitter_key = ? AND event_name = ? AND listener_id = ? RETURNING *",
      ),
      // One statement whatever the number of keys: the JSON array is expanded by json_each, and
      // the IN list is looked up key by key on the unique index.
      findSubscriptions: db.prepare<[string, string], SubscriptionRow>(
        "SELECT * FROM subscriptions WHERE emitter_key IN (SELECT value FROM json_each(?)) AND event_name = ?",
      ),
      deleteSubscriptionsOf: db.prepare<[string, string]>(
        "DELETE FROM subscriptions WHERE emitter_key = ? OR listener_id = ?",
      ),
      subscriptionsOfUser: pageStatements<SubscriptionRow>(db, "subscriptions", "user_id"),
      subscriptionsOfWorkspace: pageStatements<SubscriptionRow>(db, "subscriptions", "workspace_id"),

      insertAuto: db.prepare(
        `INSERT INTO auto_subscriptions (id, user_id, workspace_id, event_name, listener_id, listener_kind, created_at)
         VALUES (@id, @userId, @workspaceId, @eventName, @listenerId, @listenerKind, @createdAt)
         ON CONFLICT (user_id, event_name, listener_id) DO NOTHING`,
      ),
      autoByKey: db.prepare<[string, string, string], AutoSubscriptionRow>(
        "SELECT * FROM auto_subscriptions WHERE user_id = ? AND event_name = ? AND listener_id = ?",
      ),
      autosOfUser: db.prepare<[string], AutoSubscriptionRow>(
        "SELECT * FROM auto_subscriptions WHERE user_id = ? ORDER BY id ASC",
      ),
      deleteAutosOf: db.prepare<[string]>("DELETE FROM auto_subscriptions WHERE listener_id = ?"),
    };
  }

  async createWebhook(webhook: WebhookRecord): Promise<void> {
    this.cache.clear();
    try {
      this.statements.insertWebhook.run(webhook);
    } catch (error) {
      if (violatedConstraint(error)?.includes("webhooks.id")) throw conflict(`webhook ${webhook.id} exists already`);
      throw error;
    }
  }

  async getWebhook(id: string): Promise<WebhookRecord | undefined> {
    let found = this.cache.get(this.webhooks, id);
    if (found === undefined) {
      const row = this.statements.webhookById.get(id);
      found = this.cache.set(this.webhooks, id, row ? toWebhook(row) : null);
    }
    // A flat record: a shallow copy cannot reach the frozen cached one.
    return found === null ? undefined : { ...found };
  }

  async updateWebhook(webhook: WebhookRecord): Promise<void> {
    this.cache.clear();
    const { changes } = this.statements.updateWebhook.run(webhook);
    if (changes === 0) throw notFound(`webhook ${webhook.id}`);
  }

  async deleteWebhook(id: string): Promise<void> {
    this.cache.clear();
    this.statements.deleteWebhook.run(id);
  }

  async listWebhooksOfUser(userId: string, page: PageQuery): Promise<Page<WebhookRecord>> {
    return readPage(this.statements.webhooksOfUser, userId, page, toWebhook);
  }

  async putSubscription(subscription: SubscriptionRecord): Promise<SubscriptionRecord> {
    this.cache.clear();
    const s = this.statements;
    try {
      return this.db
        .transaction(() => {
          s.insertSubscription.run(subscription);
          const row = s.subscriptionByKey.get(subscription.emitterKey, subscription.eventName, subscription.listenerId);
          // The row was either inserted or already there, and nothing else writes inside this transaction.
          return toSubscription(row!);
        })
        .immediate();
    } catch (error) {
      if (violatedConstraint(error)?.includes("subscriptions.id")) {
        throw conflict(`subscription ${subscription.id} exists already`);
      }
      throw error;
    }
  }

  async deleteSubscription(key: SubscriptionKey): Promise<SubscriptionRecord | undefined> {
    this.cache.clear();
    const row = this.statements.deleteSubscriptionByKey.get(key.emitterKey, key.eventName, key.listenerId);
    return row && toSubscription(row);
  }

  async getSubscription(key: SubscriptionKey): Promise<SubscriptionRecord | undefined> {
    const row = this.statements.subscriptionByKey.get(key.emitterKey, key.eventName, key.listenerId);
    return row && toSubscription(row);
  }

  async listSubscriptionsOfUser(userId: string, page: PageQuery): Promise<Page<SubscriptionRecord>> {
    return readPage(this.statements.subscriptionsOfUser, userId, page, toSubscription);
  }

  async listSubscriptionsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SubscriptionRecord>> {
    return readPage(this.statements.subscriptionsOfWorkspace, workspaceId, page, toSubscription);
  }

  async findSubscriptions(emitterKeys: readonly string[], eventName: string): Promise<SubscriptionRecord[]> {
    if (emitterKeys.length === 0) return [];
    const key = JSON.stringify([eventName, ...emitterKeys]);
    const found =
      this.cache.get(this.found, key) ??
      this.cache.set(
        this.found,
        key,
        this.statements.findSubscriptions.all(JSON.stringify(emitterKeys), eventName).map(toSubscription),
      );
    // Records are flat: a shallow copy of each cannot reach the frozen cached ones.
    return found.map((subscription) => ({ ...subscription }));
  }

  async deleteSubscriptionsOf(resourceId: string): Promise<void> {
    this.cache.clear();
    this.statements.deleteSubscriptionsOf.run(resourceId, resourceId);
  }

  async putAutoSubscription(auto: AutoSubscriptionRecord): Promise<AutoSubscriptionRecord> {
    this.cache.clear();
    const s = this.statements;
    try {
      return this.db
        .transaction(() => {
          s.insertAuto.run(auto);
          return toAutoSubscription(s.autoByKey.get(auto.userId, auto.eventName, auto.listenerId)!);
        })
        .immediate();
    } catch (error) {
      if (violatedConstraint(error)?.includes("auto_subscriptions.id")) {
        throw conflict(`auto subscription ${auto.id} exists already`);
      }
      throw error;
    }
  }

  async listAutoSubscriptionsOfUser(userId: string): Promise<AutoSubscriptionRecord[]> {
    return this.statements.autosOfUser.all(userId).map(toAutoSubscription);
  }

  async deleteAutoSubscriptionsOf(listenerId: string): Promise<void> {
    this.cache.clear();
    this.statements.deleteAutosOf.run(listenerId);
  }
}
