/**
 * The function EventBridge Scheduler invokes when a delayed emit is due (`SchedulerDelayedEmits`):
 * `{sourceId, inEventId}` names the waiting row, whose event is stored, published and routed like
 * any emit (`deliverScheduledEmit` of `#core/delayed-emit-delivery`), its `$in` copy removed. A row
 * that is gone (cancelled, or delivered by an earlier invocation: Scheduler and Lambda deliver at
 * least once) emits nothing. A failure is thrown, so Lambda's retries apply (the stack leaves its
 * default two); the row stays until then, and expires a day after its time if none succeeds.
 */
import * as z from "zod";
import type { DelayedEmitDelivererInput } from "#config/shared-names";
import { deliverScheduledEmit } from "#core/delayed-emit-delivery";
import { EVENT_ID } from "#core/event-ids";
import type { Deps } from "#core/ports/deps";
import { awsDepsLoader, internalHandler } from "./internal-handler.ts";

export const delayedEmitDelivererInputSchema: z.ZodType<DelayedEmitDelivererInput> = z
  .object({ sourceId: z.string().startsWith("dc_").max(100), inEventId: z.string().regex(EVENT_ID) })
  .strict();

/** The handler on `loadDeps`' composition (tests pass local stores). */
export function delayedEmitDeliverer(
  loadDeps: () => Promise<Deps> = awsDepsLoader({
    // It reads the row, stores and publishes the event, and forgets the row: no component runs.
    bus: () => import("#adapters/aws/parts/bus"),
    delays: () => import("#adapters/aws/parts/delays"),
    tables: () => import("#adapters/aws/parts/tables"),
  }),
) {
  return internalHandler(
    "delayed emit",
    delayedEmitDelivererInputSchema,
    (deps, input) => deliverScheduledEmit(deps, input, deps.clock.nowMs()),
    loadDeps,
  );
}

export const handler = delayedEmitDeliverer();
