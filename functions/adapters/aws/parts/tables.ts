import { systemClock } from "#core/ports/clock";
import type { AwsPart } from "../composition.ts";
import { DynamoDbAppAccountStore } from "../dynamodb-app-account-store.ts";
import { documentClient } from "../dynamodb-client.ts";
import { DynamoDbComponentStore } from "../dynamodb-component-store.ts";
import { DynamoDbDataStoreStore } from "../dynamodb-data-store-store.ts";
import { DynamoDbDeadLetterStore } from "../dynamodb-dead-letter-store.ts";
import { DynamoDbEventStore } from "../dynamodb-event-store.ts";
import { DynamoDbIdentityStore } from "../dynamodb-identity-store.ts";
import { DynamoDbSourceRunLock } from "../dynamodb-source-run-lock.ts";
import { DynamoDbSourceStore } from "../dynamodb-source-store.ts";
import { DynamoDbSubscriptionStore } from "../dynamodb-subscription-store.ts";
import { DynamoDbUsageStore } from "../dynamodb-usage-store.ts";
import { DynamoDbWorkflowRunStore } from "../dynamodb-workflow-run-store.ts";
import { DynamoDbWorkflowStore } from "../dynamodb-workflow-store.ts";
import { lazy, once } from "../lazy-ports.ts";

/** The stores on the resources table (DynamoDB): functions whose access names the table. */
export const part: AwsPart = {
  name: "tables",
  build({ config, table, client }) {
    const documents = once(() => client("dynamodb", () => documentClient()));
    // Runs are kept as long as events: the same retention sets their TTL.
    const retention = { maxAgeMs: config.eventMaxAgeMs, keepPerChannel: 0 };
    return {
      identity: lazy("the identity store", () => new DynamoDbIdentityStore(documents(), table())),
      usage: lazy(
        "the usage store",
        () => new DynamoDbUsageStore(documents(), table(), { eventMaxAgeMs: config.eventMaxAgeMs }),
      ),
      components: lazy("the component store", () => new DynamoDbComponentStore(documents(), table())),
      sources: lazy("the source store", () => new DynamoDbSourceStore(documents(), table())),
      workflows: lazy("the workflow store", () => new DynamoDbWorkflowStore(documents(), table())),
      workflowRuns: lazy(
        "the workflow run store",
        () => new DynamoDbWorkflowRunStore(documents(), table(), { retention }),
      ),
      events: lazy("the event store", () => new DynamoDbEventStore(documents(), table(), { retention })),
      subscriptions: lazy("the subscription store", () => new DynamoDbSubscriptionStore(documents(), table())),
      deadLetters: lazy("the dead letter store", () => new DynamoDbDeadLetterStore(documents(), table())),
      dataStores: lazy("the data store store", () => new DynamoDbDataStoreStore(documents(), table())),
      appAccounts: lazy("the app account store", () => new DynamoDbAppAccountStore(documents(), table())),
      runLock: lazy(
        "the source run lock",
        () => new DynamoDbSourceRunLock(documents(), table(), { clock: systemClock }),
      ),
    };
  },
};
