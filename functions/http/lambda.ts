import type { Context } from "aws-lambda";
import { createHttpHandler, type HttpEvent } from "./pipeline.ts";
import type { AnyRoute } from "./route.ts";

/**
 * The Lambda entry of a route: the shared middy stack with the AWS adapters. The composition
 * root is imported on the first invocation, so local mode (which imports the same route files)
 * never loads the AWS SDK, and a cold start builds the clients once per container.
 */
export function lambdaHandler(route: AnyRoute) {
  const handler = createHttpHandler(route, async () => (await import("#adapters/aws/composition")).awsDeps());
  return (event: HttpEvent, context: Context) => handler(event, context as never);
}
