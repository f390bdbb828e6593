/**
 * Local mode's driver of paused workflow runs: every second it dispatches the pauses whose time
 * came (`dispatchDuePauses` of `#core/workflow-pauses`), in batches until none is left, one pass
 * at a time. What a stopped process left paused goes on with the first pass after the next start,
 * late if its time passed meanwhile (docs/workflows.md "Pausing a run"). On AWS there is no
 * driver: EventBridge Scheduler fires each pause at its time.
 */
import type { Deps } from "#core/ports/deps";
import type { PolledPausedRunStore } from "#core/ports/paused-runs";
import { DISPATCH_BATCH, dispatchDuePauses } from "#core/workflow-pauses";
import { type PeriodicPass, startBatchedPass } from "./periodic-pass.ts";

/** How often paused runs are looked at: the precision of a pause's time in local mode. */
export const PAUSED_RUN_POLL_MS = 1000;

export function startPausedRunDriver(
  deps: Pick<Deps, "runs" | "log" | "clock">,
  store: PolledPausedRunStore,
  pollMs = PAUSED_RUN_POLL_MS,
): PeriodicPass {
  const dispatch = () => dispatchDuePauses(deps, store, deps.clock.nowMs());
  return startBatchedPass(pollMs, DISPATCH_BATCH, dispatch, deps.log, "paused workflow runs not dispatched");
}
