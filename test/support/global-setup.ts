import type { TestProject } from "vitest/node";
import { startDynamoDbLocal } from "./dynamodb-local.ts";

declare module "vitest" {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
  }
}

/**
 * Starts one DynamoDB Local for the whole run and stops it at the end. It is not awaited here:
 * the JVM takes several seconds to start, and the other suites run meanwhile; the contract suite
 * waits for readiness itself.
 */
export default async function setup(project: TestProject) {
  const dynamodb = await startDynamoDbLocal();
  project.provide("dynamodbEndpoint", dynamodb.endpoint);
  return async () => {
    await dynamodb.stop();
  };
}
