import { afterAll, describe, inject } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbComponentStore } from "#adapters/aws/dynamodb-component-store";
import { DynamoDbEventStore } from "#adapters/aws/dynamodb-event-store";
import { DynamoDbIdentityStore } from "#adapters/aws/dynamodb-identity-store";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import { DynamoDbUsageStore } from "#adapters/aws/dynamodb-usage-store";
import { SqliteComponentStore } from "#adapters/local/sqlite-component-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import { SqliteSourceStore } from "#adapters/local/sqlite-source-store";
import { SqliteUsageStore } from "#adapters/local/sqlite-usage-store";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { componentStoreContract } from "./component-store.contract.ts";
import { eventStoreContract } from "./event-store.contract.ts";
import { identityStoreContract } from "./identity-store.contract.ts";
import { sourceStoreContract } from "./source-store.contract.ts";
import { storedUsageContract } from "./stored-usage.contract.ts";
import { usageStoreContract } from "./usage-store.contract.ts";

/** The event stores' retention when a test sets none: its ids use small, long-past ms. */
const KEEP_FOREVER = { maxAgeMs: 0, keepPerChannel: 0 };

describe("SQLite adapters", () => {
  identityStoreContract(async () => new SqliteIdentityStore(openSqlite(":memory:")));
  usageStoreContract(async () => new SqliteUsageStore(openSqlite(":memory:")));
  componentStoreContract(async () => new SqliteComponentStore(openSqlite(":memory:")));
  sourceStoreContract(async () => new SqliteSourceStore(openSqlite(":memory:")));
  eventStoreContract(
    async (options) => new SqliteEventStore(openSqlite(":memory:"), { retention: options?.retention ?? KEEP_FOREVER }),
    { sweep: (store, nowMs) => store.trimExpired(nowMs), keepsPerChannel: true },
  );
  storedUsageContract(async (maxAgeMs) => {
    const db = openSqlite(":memory:");
    const events = new SqliteEventStore(db, { retention: { maxAgeMs, keepPerChannel: 0 } });
    return {
      events,
      usage: new SqliteUsageStore(db),
      expireAt: async (nowMs) => void (await events.trimExpired(nowMs)),
    };
  });
});

describe("DynamoDB adapters (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  // The document client the AWS composition builds, so the contract covers its marshalling too.
  const documents = documentClient(client);
  let tables = 0;

  /** A fresh table per test, so each starts empty as the contract requires. */
  const freshTable = () => createResourcesTable(endpoint, `resources-${process.pid}-${++tables}`);

  afterAll(() => client.destroy());

  identityStoreContract(async () => new DynamoDbIdentityStore(documents, await freshTable()));
  usageStoreContract(async () => new DynamoDbUsageStore(documents, await freshTable()));
  componentStoreContract(async () => new DynamoDbComponentStore(documents, await freshTable()));
  sourceStoreContract(async () => new DynamoDbSourceStore(documents, await freshTable()));
  eventStoreContract(
    async (options) =>
      new DynamoDbEventStore(documents, await freshTable(), { retention: options?.retention ?? KEEP_FOREVER }),
  );
  storedUsageContract(async (maxAgeMs) => {
    const table = await freshTable();
    let now = Date.now();
    const clock = { nowMs: () => now };
    return {
      events: new DynamoDbEventStore(documents, table, { retention: { maxAgeMs, keepPerChannel: 0 } }),
      usage: new DynamoDbUsageStore(documents, table, { eventMaxAgeMs: maxAgeMs, clock }),
      // DynamoDB's TTL removes expired events unannounced: the day buckets leave the sum by time alone.
      expireAt: async (nowMs) => {
        now = nowMs;
      },
    };
  });
});
