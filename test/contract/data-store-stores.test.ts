import { afterAll, describe, inject } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbDataStoreStore } from "#adapters/aws/dynamodb-data-store-store";
import { SqliteDataStoreStore } from "#adapters/local/sqlite-data-store-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { dataStoreStoreContract } from "./data-store-store.contract.ts";

describe("SqliteDataStoreStore", () => {
  dataStoreStoreContract(async () => new SqliteDataStoreStore(openSqlite(":memory:")));
});

describe("DynamoDbDataStoreStore (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  const documents = documentClient(client);
  let tables = 0;
  const freshTable = () => createResourcesTable(endpoint, `data-stores-${process.pid}-${++tables}`);
  afterAll(() => client.destroy());

  dataStoreStoreContract(async () => new DynamoDbDataStoreStore(documents, await freshTable()));
});
