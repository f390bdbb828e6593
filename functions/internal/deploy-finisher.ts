/**
 * The deploy finisher (docs/aws.md "Deploy time budget"): invoked asynchronously by
 * `POST /v1/sources`, `PUT /v1/sources/{id}` and the workflow routes (for the sources their
 * triggers deploy, activate or deactivate) with `{"sourceId": ...}` when the steps left of a
 * deploy or an update (the source's function, its `deploy` and `activate` hooks, an update's
 * previous `deactivate`) cannot fit in the request's time, and by the removing routes when a
 * deletion's `deactivate` cannot (then it runs the hook and removes the source). A workflow's trigger source is
 * subscribed to by its workflow here, once its hooks ran. It goes on from the step the record
 * names, every step with its whole time, and clears the mark; a failure is kept on the source
 * (`deploy_state: "failed"`). No retries (the stack sets none): a retried job could run
 * a hook twice, and a job that never ran leaves a marked source, which the recovery sweep removes.
 */
import * as z from "zod";
import type { Deps } from "#core/ports/deps";
import { finishDeploy } from "#core/sources";
import { awsDepsLoader } from "./internal-handler.ts";

const jobSchema = z.object({ sourceId: z.string().min(1) });

/** The part of Lambda's context the finisher reads. */
interface FinisherContext {
  getRemainingTimeInMillis?: () => number;
}

/** The finisher's entry with its dependencies given (tests); {@link handler} builds the AWS ones. */
export const createDeployFinisherHandler =
  (
    loadDeps: () => Promise<Deps> = awsDepsLoader({
      // What the deploying routes deploy with (functions/http/create-source.ts); the tables hold workflows too.
      bus: () => import("#adapters/aws/parts/bus"),
      delays: () => import("#adapters/aws/parts/delays"),
      host: () => import("#adapters/aws/parts/host"),
      secrets: () => import("#adapters/aws/parts/secrets"),
      tables: () => import("#adapters/aws/parts/tables"),
      timers: () => import("#adapters/aws/parts/timers"),
      trees: () => import("#adapters/aws/parts/trees"),
    }),
  ) =>
  async (event: unknown, context?: FinisherContext): Promise<void> => {
    const { sourceId } = jobSchema.parse(event);
    const deps = await loadDeps();
    // The function's own end: a finisher that could outlive the sweep's bound leaves the source to it.
    const mustEndByMs = deps.clock.nowMs() + (context?.getRemainingTimeInMillis?.() ?? 0);
    const outcome = await finishDeploy(deps, sourceId, mustEndByMs);
    deps.log.info("deploy finisher done", { source_id: sourceId, outcome });
  };

export const handler = createDeployFinisherHandler();
