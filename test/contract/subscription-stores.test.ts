import { afterAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbDeadLetterStore } from "#adapters/aws/dynamodb-dead-letter-store";
import { DynamoDbSubscriptionStore } from "#adapters/aws/dynamodb-subscription-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteSubscriptionStore } from "#adapters/local/sqlite-subscription-store";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { deadLetterStoreContract } from "./dead-letter-store.contract.ts";
import { subscriptionStoreContract } from "./subscription-store.contract.ts";

describe("SQLite adapters", () => {
  subscriptionStoreContract(async () => new SqliteSubscriptionStore(openSqlite(":memory:")));
  deadLetterStoreContract(async () => new SqliteDeadLetterStore(openSqlite(":memory:")));

  it("looks up the emit path and both cascades on indexes, never by scanning the table", () => {
    const db = openSqlite(":memory:");
    const store = new SqliteSubscriptionStore(db);
    // The statements the store prepared, read back from better-sqlite3 (`source` is their SQL).
    const statements = (store as unknown as { statements: Record<string, { source: string }> }).statements;
    const plan = (name: string, ...params: string[]) =>
      db
        .prepare<string[], { detail: string }>(`EXPLAIN QUERY PLAN ${statements[name]!.source}`)
        .all(...params)
        .map((row) => row.detail)
        .join("\n");
    expect(plan("findSubscriptions", '["a","b"]', "")).toMatch(
      /SEARCH subscriptions USING INDEX \S+ \(emitter_key=\? AND event_name=\?\)/,
    );
    const cascade = plan("deleteSubscriptionsOf", "x", "x");
    expect(cascade).toContain("MULTI-INDEX OR");
    expect(cascade).not.toMatch(/SCAN subscriptions/);
    expect(plan("deleteAutosOf", "x")).toMatch(/SEARCH auto_subscriptions USING INDEX auto_subscriptions_by_listener/);
  });
});

describe("DynamoDB adapters (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  // The document client the AWS composition builds, so the contract covers its marshalling too.
  const documents = documentClient(client);
  let tables = 0;

  /** A fresh table per test, so each starts empty as the contract requires. */
  const freshTable = () => createResourcesTable(endpoint, `routing-${process.pid}-${++tables}`);

  afterAll(() => client.destroy());

  subscriptionStoreContract(async () => new DynamoDbSubscriptionStore(documents, await freshTable()));
  deadLetterStoreContract(async () => new DynamoDbDeadLetterStore(documents, await freshTable()));
});
