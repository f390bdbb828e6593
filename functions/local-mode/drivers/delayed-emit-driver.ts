/**
 * Local mode's driver of delayed emits: every second it delivers what is due
 * (`deliverDueEmits` of `#core/delayed-emit-delivery`), in batches until none is left, one pass at
 * a time. What a stopped process left waiting is delivered by the first pass after the next start,
 * late if its time passed meanwhile (docs/events.md "Delayed emits"). On AWS there is no driver:
 * EventBridge Scheduler fires each delayed emit at its time.
 */
import { DELIVERY_BATCH, deliverDueEmits } from "#core/delayed-emit-delivery";
import type { PolledDelayedEmitStore } from "#core/ports/delayed-emits";
import type { Deps } from "#core/ports/deps";
import { type PeriodicPass, startBatchedPass } from "./periodic-pass.ts";

/** How often due delayed emits are looked for: the precision of `delivery_ts` in local mode. */
export const DELAYED_EMIT_POLL_MS = 1000;

type DriverDeps = Parameters<typeof deliverDueEmits>[0] & Pick<Deps, "clock" | "log">;

export function startDelayedEmitDriver(
  deps: DriverDeps,
  store: PolledDelayedEmitStore,
  pollMs = DELAYED_EMIT_POLL_MS,
): PeriodicPass {
  const deliver = () => deliverDueEmits(deps, store, deps.clock.nowMs());
  return startBatchedPass(pollMs, DELIVERY_BATCH, deliver, deps.log, "delayed emits not delivered");
}
