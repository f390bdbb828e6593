import { gunzipSync, gzipSync } from "node:zlib";
import { type DynamoDBDocumentClient, GetCommand, QueryCommand } from "@aws-sdk/lib-dynamodb";
import type { ComponentRecord } from "#core/component-model";
import { conflict, DomainError } from "#core/errors";
import type { ComponentStore } from "#core/ports/component-store";
import { failedConditionIndexes } from "./dynamodb-errors.ts";
import { collectionQuery, type Item, putAllNew } from "./dynamodb-paging.ts";
import { MAX_STORED_COMPONENT_BYTES, resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

function toItem(component: ComponentRecord, code: Uint8Array, metadata: string): Item {
  const item: Item = {
    ...resourceKeys.component(component.id),
    type: "component",
    id: component.id,
    ownerId: component.ownerId,
    name: component.name,
    version: component.version,
    codeGzip: code,
    codeHash: component.codeHash,
    metadata,
    createdAt: component.createdAt,
    updatedAt: component.updatedAt,
  };
  if (component.key !== undefined) item.key = component.key;
  if (component.componentUrl !== undefined) item.componentUrl = component.componentUrl;
  return item;
}

function fromItem(item: Item): ComponentRecord {
  const component: ComponentRecord = {
    id: String(item.id),
    ownerId: String(item.ownerId),
    name: String(item.name),
    version: String(item.version),
    code: gunzipSync(item.codeGzip as Uint8Array).toString("utf8"),
    codeHash: String(item.codeHash),
    metadata: JSON.parse(String(item.metadata)),
    createdAt: Number(item.createdAt),
    updatedAt: Number(item.updatedAt),
  };
  if (typeof item.key === "string") component.key = item.key;
  if (typeof item.componentUrl === "string") component.componentUrl = item.componentUrl;
  return component;
}

/**
 * `ComponentStore` on the DynamoDB resources table. The code is stored gzipped in a Binary
 * attribute: an item holds at most 400 KB, and the API accepts bodies up to 1 MiB. A component
 * that declares a key also gets a pointer item under `COMPKEY#<owner>#<key>`, written in the same
 * transaction, so "newest by key" is one Query on those pointers (descending, limit 1).
 */
export class DynamoDbComponentStore implements ComponentStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async putComponent(component: ComponentRecord): Promise<void> {
    const code = gzipSync(Buffer.from(component.code, "utf8"));
    const metadata = JSON.stringify(component.metadata);
    // The rest of the record as JSON over-estimates its attributes (names, quotes), so the item
    // stays under DynamoDB's 400 KB whenever this passes.
    const size = code.byteLength + Buffer.byteLength(JSON.stringify({ ...component, code: "" }), "utf8");
    if (size > MAX_STORED_COMPONENT_BYTES) {
      throw new DomainError(
        "payload_too_large",
        `the component is too large to store: ${size} bytes with its code compressed, at most ${MAX_STORED_COMPONENT_BYTES}`,
      );
    }
    const items = [toItem(component, code, metadata)];
    if (component.key !== undefined) {
      items.push({
        ...resourceKeys.componentByKey(component.ownerId, component.key, component.id),
        type: "componentByKey",
        componentId: component.id,
      });
    }
    try {
      await putAllNew(this.client, this.tableName, items);
    } catch (error) {
      if (failedConditionIndexes(error).length > 0) throw conflict(`component ${component.id} exists already`);
      throw error;
    }
  }

  async getComponent(id: string): Promise<ComponentRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.component(id), ConsistentRead: true }),
    );
    return Item && fromItem(Item);
  }

  async findComponentByKey(ownerId: string, key: string): Promise<ComponentRecord | undefined> {
    const pointers = collectionQuery(
      this.tableName,
      resourceKeys.componentByKey(ownerId, key, "").pk,
      SORT_KEY_PREFIX.component,
    );
    const { Items } = await this.client.send(new QueryCommand({ ...pointers, ScanIndexForward: false, Limit: 1 }));
    const newest = Items?.[0];
    return newest && this.getComponent(String(newest.componentId));
  }
}
