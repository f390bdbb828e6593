/**
 * The function that physically removes a source's (or a deleted workflow's) deleted events (`LambdaEventPurger`), after
 * `DELETE /sources/{id}/events` has hidden them and answered 202. Lambda invokes it
 * asynchronously and retries a failed purge twice; `purgeDeletedEvents` is idempotent, so a retry,
 * a duplicate delivery or two purges of one source running together remove nothing twice and
 * nothing that was not deleted. A purge that never succeeds leaves the events hidden (reads never
 * show them); the next deletion of the source purges them.
 */
import * as z from "zod";
import type { Deps } from "#core/ports/deps";
import { awsDepsLoader, internalHandler } from "./internal-handler.ts";

export const purgeJobSchema = z.object({
  /** The emitter whose events were deleted: a source (`dc_`) or a workflow (`p_`, deleted with its events). */
  sourceId: z.string().regex(/^(dc|p)_[0-9a-z]+$/),
});
export type PurgeJob = z.infer<typeof purgeJobSchema>;

/** The purger's entry with its dependencies given (tests); {@link handler} builds the AWS ones. */
export const createEventPurgerHandler = (
  loadDeps: () => Promise<Deps> = awsDepsLoader({ tables: () => import("#adapters/aws/parts/tables") }),
) =>
  internalHandler("event purge", purgeJobSchema, (deps, job) => deps.events.purgeDeletedEvents(job.sourceId), loadDeps);

export const handler = createEventPurgerHandler();
