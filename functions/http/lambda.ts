import type { Context } from "aws-lambda";
import { createHttpHandler, type HttpEvent } from "./pipeline.ts";
import type { AnyRoute } from "./route.ts";

/**
 * The Lambda entry of a route: the shared middy stack with the AWS adapters. The composition
 * root is imported on the first invocation, so local mode (which imports the same route files)
 * never loads the AWS SDK, and a cold start builds the clients once per container.
 */
export function lambdaHandler(route: AnyRoute) {
  // A route without table access is deployed without the table's name (and without a grant).
  const resources = route.access.resources !== undefined;
  const handler = createHttpHandler(
    route,
    async () => (await import("#adapters/aws/composition")).awsDeps({ resources }),
    { logRequests: true },
  );
  return (event: HttpEvent, context: Context) => handler(event, context as never);
}
