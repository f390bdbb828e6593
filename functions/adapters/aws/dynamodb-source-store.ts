import { DeleteCommand, type DynamoDBDocumentClient, GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import {
  isDeployStep,
  type SourceRecord,
  type SourceSettings,
  type SourceState,
  type TimerSpec,
} from "#core/component-model";
import { conflict, DomainError, notFound } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import type { DeployClaim, SourceStore } from "#core/ports/source-store";
import { lowestFreeSlug } from "#core/slugs";
import { failedConditionIndexes, isConditionalCheckFailed, isTransactionConflict } from "./dynamodb-errors.ts";
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
import {
  deployingSortKeyBefore,
  MAX_STORED_SOURCE_BYTES,
  MAX_STORED_STATE_BYTES,
  resourceKeys,
  SORT_KEY_PREFIX,
} from "./table-design.ts";

/** The record's attributes as stored on every copy: props as a JSON string, no undefined values. */
function recordAttributes(source: SourceRecord): Item {
  const attributes: Item = {
    id: source.id,
    userId: source.userId,
    workspaceId: source.workspaceId,
    componentId: source.componentId,
    name: source.name,
    nameSlug: source.nameSlug,
    configuredProps: JSON.stringify(source.configuredProps),
    active: source.active,
    createdAt: source.createdAt,
    updatedAt: source.updatedAt,
  };
  if (source.endpointKey !== undefined) attributes.endpointKey = source.endpointKey;
  if (source.propDefinitions !== undefined) attributes.propDefinitions = JSON.stringify(source.propDefinitions);
  if (source.workflowId !== undefined) attributes.workflowId = source.workflowId;
  if (source.deployingSince !== undefined) attributes.deployingSince = source.deployingSince;
  if (source.deployStep !== undefined) attributes.deployStep = source.deployStep;
  if (source.deployError !== undefined) attributes.deployError = source.deployError;
  if (source.updateFrom !== undefined) attributes.updateFrom = JSON.stringify(source.updateFrom);
  if (source.timer !== undefined) {
    attributes.timer = Object.fromEntries(Object.entries(source.timer).filter(([, value]) => value !== undefined));
  }
  return attributes;
}

function fromItem(item: Item): SourceRecord {
  const source: SourceRecord = {
    id: String(item.id),
    userId: String(item.userId),
    workspaceId: String(item.workspaceId),
    componentId: String(item.componentId),
    name: String(item.name),
    nameSlug: String(item.nameSlug),
    configuredProps: JSON.parse(String(item.configuredProps)),
    active: item.active === true,
    createdAt: Number(item.createdAt),
    updatedAt: Number(item.updatedAt),
  };
  if (typeof item.endpointKey === "string") source.endpointKey = item.endpointKey;
  if (item.timer !== undefined) source.timer = item.timer as TimerSpec;
  if (typeof item.propDefinitions === "string") source.propDefinitions = JSON.parse(item.propDefinitions);
  if (typeof item.workflowId === "string") source.workflowId = item.workflowId;
  if (typeof item.deployingSince === "number") source.deployingSince = item.deployingSince;
  if (typeof item.deployStep === "string" && isDeployStep(item.deployStep)) source.deployStep = item.deployStep;
  if (typeof item.deployError === "string") source.deployError = item.deployError;
  if (typeof item.updateFrom === "string") source.updateFrom = JSON.parse(item.updateFrom) as SourceSettings;
  return source;
}

function claimItem(claim: DeployClaim): Item {
  return {
    ...resourceKeys.deployClaim(claim.userId, claim.key),
    type: "deployClaim",
    userId: claim.userId,
    key: claim.key,
    requestHash: claim.requestHash,
    sourceId: claim.sourceId,
    createdAt: claim.createdAt,
    expiresAtMs: claim.expiresAt,
    // DynamoDB's TTL removes it some time after (reads compare `expiresAtMs`).
    [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil(claim.expiresAt / 1000),
  };
}

const hasActiveTimer = (source: SourceRecord) => source.active && source.timer !== undefined;

const sameKey = (a: Key, b: Key) => a.pk === b.pk && a.sk === b.sk;

function checkSize(source: SourceRecord): void {
  const size = Buffer.byteLength(JSON.stringify(source), "utf8");
  if (size > MAX_STORED_SOURCE_BYTES) {
    throw new DomainError(
      "payload_too_large",
      `the source is too large to store: ${size} bytes, at most ${MAX_STORED_SOURCE_BYTES}`,
    );
  }
}

/**
 * `SourceStore` on the DynamoDB resources table (docs/table-design.md, "Sources"). A source is one
 * record item plus copies that serve each lookup with a single request: in its user's and its
 * workspace's collections, under its endpoint key (which doubles as the key's uniqueness guard) and
 * in the collection of active timers; plus a slug guard in its user's collection. All of them are
 * written in one transaction, conditioned on the record's internal revision `rev`, so copies never
 * disagree and a concurrent writer makes the transaction fail and be retried on a fresh read.
 */
export class DynamoDbSourceStore implements SourceStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async createSource(source: SourceRecord, claim?: DeployClaim): Promise<SourceRecord> {
    checkSize(source);
    for (let attempt = 1; ; attempt++) {
      const saved = { ...source, nameSlug: await this.freeSlug(source.userId, source.nameSlug) };
      const attributes = recordAttributes(saved);
      // The record remembers its key, so its deletion removes the claim too.
      const record: Item = { ...resourceKeys.source(saved.id), type: "source", rev: 1, ...attributes };
      if (claim) record.claimKey = claim.key;
      const items: Item[] = [
        record,
        { ...resourceKeys.sourceSlug(saved.userId, saved.nameSlug), type: "sourceSlug", sourceId: saved.id },
        ...this.copies(saved, attributes),
      ];
      const endpointIndex = items.findIndex((item) => item.type === "endpoint");
      const writes = items.map((item) => this.put(item, "attribute_not_exists(pk)"));
      const claimIndex = claim ? writes.length : -1;
      if (claim) {
        // Only an expired claim of the same user and key may be replaced.
        writes.push(
          this.put(claimItem(claim), "attribute_not_exists(pk) OR expiresAtMs <= :at", { ":at": claim.createdAt }),
        );
      }
      try {
        await this.transact(writes);
        return saved;
      } catch (error) {
        const failed = failedConditionIndexes(error);
        if (failed.includes(endpointIndex)) throw conflict("this endpoint key is in use already");
        if (claim && failed.includes(claimIndex)) {
          throw conflict(`${claim.key}: this idempotency key is held by another create`);
        }
        // Any failure besides the slug guard's is an existing id (record or one of its copies).
        if (failed.some((index) => index !== 1)) throw conflict(`source ${source.id} exists already`);
        // The slug was taken meanwhile, or a concurrent transaction held an item: read again.
        if (!(await pauseBeforeRetry(failed.includes(1) || isTransactionConflict(error), attempt))) throw error;
      }
    }
  }

  async updateSource(source: SourceRecord): Promise<SourceRecord> {
    checkSize(source);
    for (let attempt = 1; ; attempt++) {
      const stored = await this.getRecordItem(source.id);
      if (!stored) throw notFound(`source ${source.id}`);
      const old = fromItem(stored);
      const keepSlug = old.nameSlug === source.nameSlug && old.userId === source.userId;
      const nameSlug = keepSlug ? old.nameSlug : await this.freeSlug(source.userId, source.nameSlug, old);
      const saved = { ...source, nameSlug };
      const attributes = recordAttributes(saved);

      const writes: TransactItem[] = [
        this.put(
          {
            ...resourceKeys.source(saved.id),
            type: "source",
            rev: Number(stored.rev) + 1,
            ...attributes,
            ...(stored.claimKey === undefined ? {} : { claimKey: stored.claimKey }),
          },
          "rev = :rev",
          { ":rev": stored.rev },
        ),
      ];
      let slugIndex = -1;
      const newSlug = resourceKeys.sourceSlug(saved.userId, saved.nameSlug);
      const oldSlug = resourceKeys.sourceSlug(old.userId, old.nameSlug);
      if (!sameKey(newSlug, oldSlug)) {
        slugIndex = writes.length;
        writes.push(this.put({ ...newSlug, type: "sourceSlug", sourceId: saved.id }, "attribute_not_exists(pk)"));
      }
      // Keys the source keeps after this write; what it held before and is not among them goes.
      const newKeys: Key[] = [newSlug];
      let endpointIndex = -1;
      for (const copy of this.copies(saved, attributes)) {
        if (copy.type === "endpoint") {
          endpointIndex = writes.length;
          // The key may already be this source's; only another source's copy is a conflict.
          writes.push(this.put(copy, "attribute_not_exists(pk) OR id = :id", { ":id": saved.id }));
        } else {
          writes.push(this.put(copy));
        }
        newKeys.push({ pk: String(copy.pk), sk: String(copy.sk) });
      }
      for (const key of [oldSlug, ...this.copyKeys(old)]) {
        if (!newKeys.some((newKey) => sameKey(newKey, key))) writes.push(this.delete(key));
      }

      try {
        await this.transact(writes);
        return saved;
      } catch (error) {
        const failed = failedConditionIndexes(error);
        if (failed.includes(endpointIndex)) throw conflict("this endpoint key is in use already");
        const retry = failed.includes(0) || failed.includes(slugIndex) || isTransactionConflict(error);
        if (!(await pauseBeforeRetry(retry, attempt))) throw error;
      }
    }
  }

  async deleteSource(id: string): Promise<void> {
    let keepClaim = false;
    for (let attempt = 1; ; attempt++) {
      const stored = await this.getRecordItem(id);
      if (!stored) {
        // State can exist without a record (written for a source being deleted); remove it too.
        await this.client.send(new DeleteCommand({ TableName: this.tableName, Key: resourceKeys.sourceState(id) }));
        return;
      }
      const old = fromItem(stored);
      const writes = [
        this.delete(resourceKeys.source(id), "rev = :rev", { ":rev": stored.rev }),
        this.delete(resourceKeys.sourceSlug(old.userId, old.nameSlug)),
        ...this.copyKeys(old).map((key) => this.delete(key)),
        this.delete(resourceKeys.sourceState(id)),
      ];
      // Its claim, unless the key expired and another create of the user holds it now (then a
      // second try goes without it).
      const claimIndex = typeof stored.claimKey === "string" && keepClaim !== true ? writes.length : -1;
      if (claimIndex >= 0) {
        const claimKey = resourceKeys.deployClaim(old.userId, String(stored.claimKey));
        writes.push(this.delete(claimKey, "attribute_not_exists(pk) OR sourceId = :id", { ":id": id }));
      }
      try {
        await this.transact(writes);
        return;
      } catch (error) {
        if (claimIndex >= 0 && failedConditionIndexes(error).includes(claimIndex)) keepClaim = true;
        else if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
  }

  async getSource(id: string): Promise<SourceRecord | undefined> {
    const item = await this.getRecordItem(id);
    return item && fromItem(item);
  }

  // Strongly consistent although it is the hot path of HTTP events: a source is often called right
  // after it was deployed or changed, and a stale copy would route to the old configuration.
  async findSourceByEndpointKey(endpointKey: string): Promise<SourceRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.endpoint(endpointKey), ConsistentRead: true }),
    );
    return Item && fromItem(Item);
  }

  async listSourcesOfUser(userId: string, page: PageQuery): Promise<Page<SourceRecord>> {
    return this.page(resourceKeys.sourceOfUser(userId, "").pk, page);
  }

  async listSourcesOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<SourceRecord>> {
    return this.page(resourceKeys.sourceOfWorkspace(workspaceId, "").pk, page);
  }

  async findDeployClaim(userId: string, key: string, nowMs: number): Promise<DeployClaim | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.deployClaim(userId, key), ConsistentRead: true }),
    );
    if (!Item || Number(Item.expiresAtMs) <= nowMs) return undefined;
    return {
      userId: String(Item.userId),
      key: String(Item.key),
      requestHash: String(Item.requestHash),
      sourceId: String(Item.sourceId),
      createdAt: Number(Item.createdAt),
      expiresAt: Number(Item.expiresAtMs),
    };
  }

  async listDeployingSources(startedBefore: number): Promise<SourceRecord[]> {
    const before = deployingSortKeyBefore(startedBefore);
    const { pk } = resourceKeys.deployingSource(0, "");
    const items = await queryAll(this.client, {
      TableName: this.tableName,
      KeyConditionExpression: "pk = :pk AND sk < :before",
      ExpressionAttributeValues: { ":pk": pk, ":before": before },
      ConsistentRead: true,
    });
    return items.map(fromItem);
  }

  async listActiveTimerSources(): Promise<SourceRecord[]> {
    const timers = collectionQuery(this.tableName, resourceKeys.activeTimer("").pk, SORT_KEY_PREFIX.source);
    return (await queryAll(this.client, timers)).map(fromItem);
  }

  async getSourceState(sourceId: string): Promise<SourceState> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.sourceState(sourceId), ConsistentRead: true }),
    );
    if (!Item) return { db: {}, dedupe: {}, version: 0 };
    return { db: JSON.parse(String(Item.db)), dedupe: JSON.parse(String(Item.dedupe)), version: Number(Item.version) };
  }

  async putSourceState(sourceId: string, state: Omit<SourceState, "version">, expectedVersion: number): Promise<void> {
    const db = JSON.stringify(state.db);
    const dedupe = JSON.stringify(state.dedupe);
    const size = Buffer.byteLength(db, "utf8") + Buffer.byteLength(dedupe, "utf8");
    if (size > MAX_STORED_STATE_BYTES) {
      throw new DomainError(
        "payload_too_large",
        `the state of source ${sourceId} is too large to store: ${size} bytes, at most ${MAX_STORED_STATE_BYTES}`,
      );
    }
    const condition =
      expectedVersion === 0
        ? { ConditionExpression: "attribute_not_exists(pk)" }
        : { ConditionExpression: "version = :expected", ExpressionAttributeValues: { ":expected": expectedVersion } };
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            ...resourceKeys.sourceState(sourceId),
            type: "sourceState",
            db,
            dedupe,
            version: expectedVersion + 1,
          },
          ...condition,
        }),
      );
    } catch (error) {
      if (isConditionalCheckFailed(error)) {
        throw conflict(`the state of source ${sourceId} was changed by another run`);
      }
      throw error;
    }
  }

  /** The lowest free slug for `wanted` among the user's slug guards; `self`'s own slug counts as free. */
  private async freeSlug(userId: string, wanted: string, self?: SourceRecord): Promise<string> {
    const prefix = resourceKeys.sourceSlug(userId, wanted);
    const guards = await queryAll(this.client, {
      ...collectionQuery(this.tableName, prefix.pk, prefix.sk),
      ProjectionExpression: "sk",
    });
    const taken = new Set(guards.map((item) => String(item.sk).slice(SORT_KEY_PREFIX.slug.length)));
    if (self && self.userId === userId) taken.delete(self.nameSlug);
    return lowestFreeSlug(wanted, taken);
  }

  /** The copies of a source, each with its key and type. */
  private copies(source: SourceRecord, attributes: Item): Item[] {
    const copies: Item[] = [
      { ...resourceKeys.sourceOfUser(source.userId, source.id), type: "sourceOfUser", ...attributes },
      { ...resourceKeys.sourceOfWorkspace(source.workspaceId, source.id), type: "sourceOfWorkspace", ...attributes },
    ];
    if (source.endpointKey !== undefined) {
      copies.push({ ...resourceKeys.endpoint(source.endpointKey), type: "endpoint", ...attributes });
    }
    if (hasActiveTimer(source))
      copies.push({ ...resourceKeys.activeTimer(source.id), type: "activeTimer", ...attributes });
    if (source.deployingSince !== undefined) {
      copies.push({
        ...resourceKeys.deployingSource(source.deployingSince, source.id),
        type: "deploying",
        ...attributes,
      });
    }
    return copies;
  }

  private copyKeys(source: SourceRecord): Key[] {
    const keys: Key[] = [
      resourceKeys.sourceOfUser(source.userId, source.id),
      resourceKeys.sourceOfWorkspace(source.workspaceId, source.id),
    ];
    if (source.endpointKey !== undefined) keys.push(resourceKeys.endpoint(source.endpointKey));
    if (hasActiveTimer(source)) keys.push(resourceKeys.activeTimer(source.id));
    if (source.deployingSince !== undefined) keys.push(resourceKeys.deployingSource(source.deployingSince, source.id));
    return keys;
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

  private async getRecordItem(id: string): Promise<Item | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.source(id), ConsistentRead: true }),
    );
    return Item;
  }

  /** One page of a collection of source copies, newest first (docs/table-design.md, "Pagination"). */
  private async page(pk: string, page: PageQuery): Promise<Page<SourceRecord>> {
    const { items, totalCount } = await newestFirstPage(this.client, this.tableName, pk, SORT_KEY_PREFIX.source, page);
    return { items: items.map(fromItem), totalCount };
  }
}
