import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import type { DailyUsage, UsageStore } from "#ports/usage-store";
import { resourceKeys } from "./table-design.ts";

/**
 * `UsageStore` on the DynamoDB resources table: one item per owner and UTC day whose counters
 * grow with `ADD`, so concurrent invocations never lose an increment and no read precedes a write.
 */
export class DynamoDbUsageStore implements UsageStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async addUsage(ownerId: string, day: string, delta: Partial<DailyUsage>): Promise<void> {
    // All three counters are added even when a delta is 0, so the item always holds all of them
    // and one expression serves every call.
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: resourceKeys.usage(ownerId, day),
        UpdateExpression: "SET #type = :type ADD invocations :i, computeTimeMs :c, credits :r",
        ExpressionAttributeNames: { "#type": "type" },
        ExpressionAttributeValues: {
          ":type": "usage",
          ":i": delta.invocations ?? 0,
          ":c": delta.computeTimeMs ?? 0,
          ":r": delta.credits ?? 0,
        },
      }),
    );
  }

  async getUsage(ownerId: string, day: string): Promise<DailyUsage> {
    // Strongly consistent so a quota check sees the increments written just before it.
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.usage(ownerId, day), ConsistentRead: true }),
    );
    return {
      invocations: Number(Item?.invocations ?? 0),
      computeTimeMs: Number(Item?.computeTimeMs ?? 0),
      credits: Number(Item?.credits ?? 0),
    };
  }
}
