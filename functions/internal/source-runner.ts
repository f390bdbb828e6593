/**
 * The function that runs queued runs (`LambdaRunQueue`): an HTTP event answered already, a
 * delivery of another source's event, a workflow's run. Lambda invokes it asynchronously and
 * retries a run that failed twice, so a failure of the store is retried (and a workflow run another
 * runner still holds, `RunBusyError`, is tried again later); what the component does never fails it.
 */
import * as z from "zod";
import { jsonValueSchema } from "#core/json-value";
import type { RunJob } from "#core/ports/run-queue";
import { runQueuedJob } from "#core/run-jobs";
import { PAUSE_ID } from "#core/workflow-pauses";
import { awsDepsLoader, internalHandler, SOURCE_RUNNING_PARTS } from "./internal-handler.ts";

const trigger = z.enum(["http", "timer", "event"]);
const hops = z.number().int().min(0).optional();

/** A source's job; `kind` is absent in jobs queued before workflows existed. */
const sourceJobSchema = z.object({
  kind: z.literal("source").optional(),
  sourceId: z.string().startsWith("dc_"),
  trigger,
  event: jsonValueSchema,
  hops,
});

const workflowJobSchema = z.object({
  kind: z.literal("workflow"),
  workflowId: z.string().startsWith("p_"),
  runId: z.string().startsWith("run_"),
  trigger,
  triggerId: z.string().min(1),
  event: jsonValueSchema,
  hops,
  // A paused run's continuation: without it, the job would run the workflow afresh on a null event.
  resume: z.object({ pauseId: z.string().regex(PAUSE_ID) }).optional(),
});

export const runJobSchema: z.ZodType<RunJob> = z.union([workflowJobSchema, sourceJobSchema]);

/**
 * It runs sources and workflows, as the stack grants (lib/constructs/source-compute.ts): it pauses
 * workflow runs (their schedules made) and forgets a pause once its continuation ended; it queues
 * no runs.
 */
export const handler = internalHandler(
  "run job",
  runJobSchema,
  runQueuedJob,
  awsDepsLoader({ ...SOURCE_RUNNING_PARTS, pauses: () => import("#adapters/aws/parts/pauses") }),
);
