/**
 * The shape of the internal functions Lambda invokes with a JSON event (source runner, timer
 * invoker): parse the event with zod, call one use case. A malformed event is logged and dropped,
 * as retrying cannot fix it; a failure of the use case is thrown, so that the function's retry
 * setting in the stack applies.
 */
import type { z } from "zod";
import type { AwsPartLoaders } from "#adapters/aws/composition";
import type { Deps } from "#core/ports/deps";

/**
 * The AWS composition of `parts`, imported on the first invocation: tests import these modules
 * for their pure parts without loading the AWS SDK. Each function names its parts in its own
 * module (as dynamic imports), so that its bundle carries their SDK clients and no others.
 */
export const awsDepsLoader =
  (parts: AwsPartLoaders): (() => Promise<Deps>) =>
  async () =>
    (await import("#adapters/aws/composition")).loadAwsDeps(parts);

/**
 * The parts of the functions that run sources and workflows (HTTP interface, source runner,
 * timer invoker), after what the stack grants them (lib/constructs/source-compute.ts,
 * event-fanout.ts): they store and publish what runs emit, open secrets and queue the deliveries
 * and S3 writes of workflow runs, and schedule delayed emits. A bundle that does not use it leaves it out.
 */
export const SOURCE_RUNNING_PARTS = {
  bus: () => import("#adapters/aws/parts/bus"),
  delays: () => import("#adapters/aws/parts/delays"),
  deliveries: () => import("#adapters/aws/parts/deliveries"),
  host: () => import("#adapters/aws/parts/host"),
  objects: () => import("#adapters/aws/parts/objects"),
  secrets: () => import("#adapters/aws/parts/secrets"),
  tables: () => import("#adapters/aws/parts/tables"),
} satisfies AwsPartLoaders;

export function internalHandler<T>(
  what: string,
  schema: z.ZodType<T>,
  run: (deps: Deps, input: T) => Promise<unknown>,
  loadDeps: () => Promise<Deps>,
): (event: unknown) => Promise<void> {
  return async (event) => {
    const deps = await loadDeps();
    const input = schema.safeParse(event);
    if (!input.success) {
      deps.log.error(`malformed ${what} dropped`, { issues: input.error.issues });
      return;
    }
    await run(deps, input.data);
  };
}
