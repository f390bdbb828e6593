import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { loadAwsConfig } from "#config/env";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import type { IdentityStore } from "#ports/identity-store";
import { jsonLogger } from "#ports/logger";
import type { UsageStore } from "#ports/usage-store";
import { DynamoDbIdentityStore } from "./dynamodb-identity-store.ts";
import { DynamoDbUsageStore } from "./dynamodb-usage-store.ts";

let deps: Deps | undefined;

/** A document client that drops `undefined` attributes instead of failing on them. */
export function documentClient(client = new DynamoDBClient({})) {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/** A port this function was deployed without: any use is a deployment bug, reported as such. */
function unavailable<T extends object>(port: string): T {
  return new Proxy({} as T, {
    get: () => {
      throw new Error(`${port} is not available: this function was deployed without table access`);
    },
  });
}

/**
 * The composition root on AWS, built once per Lambda container on first use: configuration is
 * read and validated then, and SDK clients are reused by every later invocation. Functions of
 * routes that declare no table access get no table name, so they build no stores.
 */
export function awsDeps(options: { resources: boolean }, env: Record<string, string | undefined> = process.env): Deps {
  if (deps) return deps;
  const config = loadAwsConfig(env, options);
  const documents = config.resourcesTable === undefined ? undefined : documentClient();
  deps = {
    identity: documents
      ? new DynamoDbIdentityStore(documents, config.resourcesTable!)
      : unavailable<IdentityStore>("the identity store"),
    usage: documents
      ? new DynamoDbUsageStore(documents, config.resourcesTable!)
      : unavailable<UsageStore>("the usage store"),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log: jsonLogger({ function: env.AWS_LAMBDA_FUNCTION_NAME }),
    quotas: config.quotas,
  };
  return deps;
}
