import { afterAll, describe, inject } from "vitest";
import { DynamoDbAppAccountStore } from "#adapters/aws/dynamodb-app-account-store";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { appAccountStoreContract } from "./app-account-store.contract.ts";

// The SQLite run of the same contract is a unit test: test/unit/adapters/sqlite-app-account-store.test.ts.
describe("DynamoDbAppAccountStore (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  const documents = documentClient(client);
  let tables = 0;
  const freshTable = () => createResourcesTable(endpoint, `app-accounts-${process.pid}-${++tables}`);
  afterAll(() => client.destroy());

  appAccountStoreContract(async () => new DynamoDbAppAccountStore(documents, await freshTable()));
});
