import { afterAll, describe, inject } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbDelayedEmits } from "#adapters/aws/dynamodb-delayed-emits";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDelayedEmits } from "#adapters/local/sqlite-delayed-emits";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { delayedEmitStoreContract } from "./delayed-emit-store.contract.ts";

describe("SqliteDelayedEmits", () => {
  delayedEmitStoreContract(async () => new SqliteDelayedEmits(openSqlite(":memory:")));
});

describe("DynamoDbDelayedEmits (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  const documents = documentClient(client);
  let tables = 0;
  const freshTable = () => createResourcesTable(endpoint, `delayed-emits-${process.pid}-${++tables}`);
  afterAll(() => client.destroy());

  delayedEmitStoreContract(async () => new DynamoDbDelayedEmits(documents, await freshTable()));
});
