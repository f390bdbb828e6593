import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { loadAwsConfig } from "#config/env";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import { jsonLogger } from "#ports/logger";
import { DynamoDbIdentityStore } from "./dynamodb-identity-store.ts";
import { DynamoDbUsageStore } from "./dynamodb-usage-store.ts";

let deps: Deps | undefined;

/** A document client that drops `undefined` attributes instead of failing on them. */
export function documentClient(client = new DynamoDBClient({})) {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/**
 * The composition root on AWS, built once per Lambda container on first use: configuration is
 * read and validated then, and SDK clients are reused by every later invocation.
 */
export function awsDeps(env: Record<string, string | undefined> = process.env): Deps {
  if (deps) return deps;
  const config = loadAwsConfig(env);
  const documents = documentClient();
  deps = {
    identity: new DynamoDbIdentityStore(documents, config.resourcesTable),
    usage: new DynamoDbUsageStore(documents, config.resourcesTable),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log: jsonLogger({ function: env.AWS_LAMBDA_FUNCTION_NAME }),
    quotas: config.quotas,
  };
  return deps;
}
