import { afterAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbSourceRunLock } from "#adapters/aws/dynamodb-source-run-lock";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import { LocalSourceRunLock } from "#adapters/local/local-source-run-lock";
import { systemClock } from "#core/ports/clock";
import { countConcurrentRuns } from "../support/db-counter.ts";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { sourceRunLockContract } from "./source-run-lock.contract.ts";

describe("LocalSourceRunLock", () => {
  sourceRunLockContract(async () => new LocalSourceRunLock(systemClock));
});

describe("DynamoDbSourceRunLock (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  const documents = documentClient(client);
  let tables = 0;
  const freshTable = () => createResourcesTable(endpoint, `run-locks-${process.pid}-${++tables}`);
  afterAll(() => client.destroy());

  sourceRunLockContract(async () => new DynamoDbSourceRunLock(documents, await freshTable(), { clock: systemClock }));

  it("gives N concurrent runs of a $.service.db counter N distinct counts, through the use case", async () => {
    const table = await freshTable();
    const counts = await countConcurrentRuns(10, {
      runLock: new DynamoDbSourceRunLock(documents, table, { clock: systemClock }),
      sources: new DynamoDbSourceStore(documents, table),
    });
    expect(counts).toEqual(Array.from({ length: 10 }, (_, index) => index + 1));
  });
});
