/**
 * Local mode's driver of paused workflow runs: every second it dispatches the pauses whose time
 * came (`dispatchDuePauses` of `#core/workflow-pauses`), in batches until none is left, one pass
 * at a time. What a stopped process left paused goes on with the first pass after the next start,
 * late if its time passed meanwhile (docs/workflows.md "Pausing a run"). On AWS there is no
 * driver: EventBridge Scheduler fires each pause at its time.
 */
import type { Deps } from "#core/ports/deps";
import type { PolledPausedRunStore } from "#core/ports/paused-runs";
import { dispatchDuePauses } from "#core/workflow-pauses";
import { type PeriodicPass, startPeriodicPass } from "./periodic-pass.ts";

/** How often paused runs are looked at: the precision of a pause's time in local mode. */
export const PAUSED_RUN_POLL_MS = 1000;

export function startPausedRunDriver(
  deps: Pick<Deps, "runs" | "log" | "clock">,
  store: PolledPausedRunStore,
  pollMs = PAUSED_RUN_POLL_MS,
): PeriodicPass {
  let stopped = false;
  const dispatch = async () => {
    // A full batch means more may be due: go on at once rather than a second later.
    while (!stopped && (await dispatchDuePauses(deps, store, deps.clock.nowMs())) >= 100) {}
  };
  const pass = startPeriodicPass(pollMs, dispatch, deps.log, "paused workflow runs not dispatched");
  return {
    async stop() {
      stopped = true;
      await pass.stop();
    },
  };
}
