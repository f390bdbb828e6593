import type { Context } from "aws-lambda";
import type { AwsPart, AwsPartName } from "#adapters/aws/composition";
import { loadAwsDeps } from "#aws-composition";
import { createHttpHandler, type HttpEvent } from "./pipeline.ts";
import type { AnyRoute, RouteDefinition } from "./route.ts";

/**
 * The parts of the AWS composition a route's function uses: the access it declares, which the
 * stack grants (lib/constructs/api-route-function.ts), no more.
 */
export function awsPartsFor(access: RouteDefinition["access"]): AwsPartName[] {
  const parts: AwsPartName[] = [];
  const { compute } = access;
  // Deploying and removing run hooks; no compute route queues runs (lib/constructs/source-compute.ts).
  const runsHooks = compute === "deploy" || compute === "remove";
  if (access.resources) parts.push("tables");
  if (compute) parts.push("host");
  if (runsHooks) parts.push("timers");
  if (access.secrets) parts.push("secrets");
  // Routes that run hooks with secrets store and publish the events those emit.
  if (runsHooks && access.secrets) parts.push("bus");
  if (access.eventPurges) parts.push("purger");
  // Applying runs schedules delayed emits; deleting `$in` events or sources cancels them.
  if (runsHooks || access.eventPurges) parts.push("delays");
  if (access.deliveries) parts.push("deliveries");
  if (access.files) parts.push("files");
  // Deleting a workflow forgets its paused runs, schedules included.
  if (access.pausedRuns) parts.push("pauses");
  // Only deploying installs components' packages for good: it keeps installed trees in S3.
  if (compute === "deploy") parts.push("trees");
  return parts.sort();
}

/** The parts of the AWS composition a route's function is bundled with, by name. */
export type AwsParts = Readonly<Partial<Record<AwsPartName, AwsPart>>>;

/**
 * The Lambda entry of a route: the shared middy stack with the AWS adapters. `aws` holds the
 * parts of the AWS composition the route uses, each imported statically in the route's file from
 * `#aws-parts/<name>`, as the composition root is here from `#aws-composition`: in a Lambda bundle
 * they are the real ones (esbuild's conditions, `./aws-stand-ins.ts`), so esbuild bundles those
 * parts' SDK clients and no others; everywhere else (local mode, the tests) they are stand-ins
 * that load no SDK. The parts are built on the first invocation, once per container. They must be
 * the parts the route's access needs ({@link awsPartsFor}); a route whose list differs fails when
 * its module is loaded, in every test that imports it.
 *
 * Route files call it as `/* @__PURE__ *\/ lambdaHandler(...)`: a bundle that imports route modules
 * for their definitions only (the OpenAPI document, the not-found router) then drops their Lambda
 * entries, and with them the parts and SDK clients those name. (esbuild's `pure` option would not
 * do: it does not apply to imported functions.)
 */
export function lambdaHandler(route: AnyRoute, aws: AwsParts = {}) {
  const needed = awsPartsFor(route.access).join(", ");
  const given = Object.keys(aws).sort().join(", ");
  if (given !== needed) {
    throw new Error(`Route "${route.name}" names the AWS parts [${given}], but its access needs [${needed}]`);
  }
  const loaders = Object.fromEntries(Object.entries(aws).map(([name, part]) => [name, async () => ({ part })]));
  const handler = createHttpHandler(route, () => loadAwsDeps(loaders), { logRequests: true });
  return (event: HttpEvent, context: Context) => handler(event, context as never);
}
