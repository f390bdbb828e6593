/**
 * The function EventBridge Scheduler invokes when a paused workflow run's time comes
 * (`SchedulerPausedRuns`): `{pauseId}` names the pause, which is taken as its time having come
 * (a delay or a rerun goes on, a suspension is cancelled) unless a URL took it first, and its
 * continuation is queued on the source runner (`dispatchDuePause` of `#core/workflow-pauses`). A
 * pause that is gone (its continuation ended, its workflow deleted) does nothing; one a URL took
 * has its continuation queued again under the same run id, which runs once. A failure is thrown,
 * so Lambda's retries apply (the stack leaves its default two): dispatching again is harmless.
 */
import * as z from "zod";
import type { PausedRunDispatcherInput } from "#config/shared-names";
import type { Deps } from "#core/ports/deps";
import { dispatchDuePause, PAUSE_ID } from "#core/workflow-pauses";
import { awsDepsLoader, internalHandler } from "./internal-handler.ts";

export const pausedRunDispatcherInputSchema: z.ZodType<PausedRunDispatcherInput> = z
  .object({ pauseId: z.string().regex(PAUSE_ID) })
  .strict();

/** The handler on `loadDeps`' composition (tests pass local stores). */
export function pausedRunDispatcher(
  loadDeps: () => Promise<Deps> = awsDepsLoader({
    // It takes the pause and queues its continuation: no component runs, no schedule is made.
    pauses: () => import("#adapters/aws/parts/pauses"),
    runs: () => import("#adapters/aws/parts/runs"),
    tables: () => import("#adapters/aws/parts/tables"),
  }),
) {
  return internalHandler(
    "paused run dispatch",
    pausedRunDispatcherInputSchema,
    async (deps, input) => {
      const found = await dispatchDuePause(deps, input.pauseId, deps.clock.nowMs());
      if (!found) deps.log.debug("a paused run's schedule fired for no pause", { run_id: input.pauseId });
    },
    loadDeps,
  );
}

export const handler = pausedRunDispatcher();
