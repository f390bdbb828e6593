/**
 * The function that runs queued source runs (`LambdaRunQueue`): an HTTP event answered already, a
 * delivery of another source's event. Lambda invokes it asynchronously and retries a run that
 * failed twice, so a failure of the store is retried; what the component does never fails it.
 */
import { z } from "zod";
import { jsonValueSchema } from "#core/json-value";
import { runSource } from "#core/source-runs";
import { internalHandler } from "./internal-handler.ts";

export const runJobSchema = z.object({
  sourceId: z.string().startsWith("dc_"),
  trigger: z.enum(["http", "timer", "event"]),
  event: jsonValueSchema,
  hops: z.number().int().min(0).optional(),
});

export const handler = internalHandler("run job", runJobSchema, runSource);
