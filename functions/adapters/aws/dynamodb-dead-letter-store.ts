import { DeleteCommand, type DynamoDBDocumentClient, GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { DomainError } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import type { DeadLetterStore } from "#core/ports/dead-letter-store";
import { type DeadLetterRecord, destinationOf } from "#core/subscription-model";
import { isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, deleteAllMatching, type Item, newestFirstPage } from "./dynamodb-paging.ts";
import { MAX_STORED_DEAD_LETTER_BYTES, SUBSCRIPTION_SORT_KEY_PREFIX, subscriptionKeys } from "./subscription-keys.ts";

function deadLetterAttributes(deadLetter: DeadLetterRecord): Item {
  const attributes: Item = {
    id: deadLetter.id,
    webhookId: destinationOf(deadLetter),
    subscriptionIds: [...deadLetter.subscriptionIds],
    emitterId: deadLetter.emitterId,
    eventId: deadLetter.eventId,
    channel: deadLetter.channel,
    // A JSON string keeps any payload exact (a map nests 32 levels at most and refuses undefined).
    payload: JSON.stringify(deadLetter.payload),
    attempts: deadLetter.attempts,
    nextAttemptAt: deadLetter.nextAttemptAt,
    createdAt: deadLetter.createdAt,
    userId: deadLetter.userId,
    failedAt: deadLetter.failedAt,
  };
  if (deadLetter.lastError !== undefined) attributes.lastError = deadLetter.lastError;
  // A send's target as JSON (a webhook's is its id, above); the partition is the workflow's `p_`.
  if (deadLetter.target.kind !== "webhook") attributes.target = JSON.stringify(deadLetter.target);
  return attributes;
}

function toDeadLetter(item: Item): DeadLetterRecord {
  const deadLetter: DeadLetterRecord = {
    id: String(item.id),
    target:
      typeof item.target === "string"
        ? JSON.parse(item.target)
        : { kind: "webhook", webhookId: String(item.webhookId) },
    subscriptionIds: (item.subscriptionIds as unknown[]).map(String),
    emitterId: String(item.emitterId),
    eventId: String(item.eventId),
    channel: String(item.channel),
    payload: JSON.parse(String(item.payload)),
    attempts: Number(item.attempts),
    nextAttemptAt: Number(item.nextAttemptAt),
    createdAt: Number(item.createdAt),
    userId: String(item.userId),
    failedAt: Number(item.failedAt),
  };
  if (typeof item.lastError === "string") deadLetter.lastError = item.lastError;
  return deadLetter;
}

/**
 * `DeadLetterStore` on the DynamoDB resources table: one partition per webhook, `DLQ#<webhookId>`,
 * sorted by delivery id (`DL#<id>`), so a page is one Query and a dead letter one GetItem.
 * Putting one again (a replay that failed again) replaces it.
 */
export class DynamoDbDeadLetterStore implements DeadLetterStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async putDeadLetter(deadLetter: DeadLetterRecord): Promise<void> {
    const attributes = deadLetterAttributes(deadLetter);
    const size = Buffer.byteLength(JSON.stringify(attributes), "utf8");
    if (size > MAX_STORED_DEAD_LETTER_BYTES) {
      throw new DomainError(
        "payload_too_large",
        `the dead letter ${deadLetter.id} is too large to store: ${size} bytes, at most ${MAX_STORED_DEAD_LETTER_BYTES}`,
      );
    }
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          ...subscriptionKeys.deadLetter(destinationOf(deadLetter), deadLetter.id),
          type: "deadLetter",
          ...attributes,
        },
      }),
    );
  }

  async getDeadLetter(webhookId: string, id: string): Promise<DeadLetterRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({
        TableName: this.tableName,
        Key: subscriptionKeys.deadLetter(webhookId, id),
        ConsistentRead: true,
      }),
    );
    return Item && toDeadLetter(Item);
  }

  async listDeadLetters(webhookId: string, page: PageQuery): Promise<Page<DeadLetterRecord>> {
    const pk = subscriptionKeys.deadLetter(webhookId, "").pk;
    const prefix = SUBSCRIPTION_SORT_KEY_PREFIX.deadLetter;
    const { items, totalCount } = await newestFirstPage(this.client, this.tableName, pk, prefix, page);
    return { items: items.map(toDeadLetter), totalCount };
  }

  async deleteDeadLetter(webhookId: string, id: string): Promise<boolean> {
    // Conditioned on the item existing, so of two racing replays exactly one deletes it.
    try {
      await this.client.send(
        new DeleteCommand({
          TableName: this.tableName,
          Key: subscriptionKeys.deadLetter(webhookId, id),
          ConditionExpression: "attribute_exists(pk)",
        }),
      );
      return true;
    } catch (error) {
      if (isConditionalCheckFailed(error)) return false;
      throw error;
    }
  }

  async deleteDeadLettersOf(webhookId: string): Promise<void> {
    const pk = subscriptionKeys.deadLetter(webhookId, "").pk;
    const collection = collectionQuery(this.tableName, pk, SUBSCRIPTION_SORT_KEY_PREFIX.deadLetter);
    await deleteAllMatching(this.client, this.tableName, { ...collection, ProjectionExpression: "pk, sk" });
  }
}
