import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { ID_PREFIXES } from "#core/ids";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWorkflowRuns } from "#core/workflow-runs";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, paginated } from "./schemas.ts";

const nullableText = z.string().nullable();

export const workflowRunSchema = z.object({
  id: z.string().meta({ description: "The run id (run_): $.context.id of the run" }),
  workflow_id: z.string(),
  deployment_id: z.string(),
  trigger: z.object({
    type: z.enum(["http", "timer", "event"]),
    id: z.string().meta({ description: "The HTTP trigger (hi_), the timer (ti_) or the emitter of the event" }),
  }),
  status: z.enum(["running", "success", "exited", "error", "paused", "cancelled"]),
  attempts: z.number().int().meta({ description: "1, plus one per take-over of a run whose runner died" }),
  started_at_ms: z.number().int(),
  ended_at_ms: z.number().int().nullable(),
  duration_ms: z.number().int().nullable(),
  event_preview: z.unknown().meta({ description: "The trigger event; its JSON cut to 1 KB when longer" }),
  steps: z.array(
    z.object({
      id: z.string(),
      namespace: z.string(),
      status: z.enum(["success", "error", "exited", "skipped"]),
      summary: nullableText,
      duration_ms: z.number().int(),
      export_bytes: z.number().int(),
    }),
  ),
  error: z.object({ code: z.string(), cell_id: z.string(), message: z.string() }).nullable(),
  exit_reason: nullableText,
  pause: z
    .object({
      kind: z.enum(["suspend", "delay", "rerun"]),
      step_id: z.string(),
      until_ms: z.number().int().meta({ description: "When a delay or rerun goes on, or a suspension is cancelled" }),
    })
    .nullable()
    .meta({ description: "status paused: how the run paused ($.flow.suspend, delay or rerun) and at which step" }),
  resumed_from: nullableText.meta({ description: "A continuation: the run (run_) that paused, which it goes on from" }),
  cancel_reason: z.enum(["cancel_url", "timeout", "inactive"]).nullable().meta({
    description:
      "status cancelled: its cancel URL was requested, a suspension's time ran out, or the workflow was made inactive while it waited",
  }),
  logs: z.array(z.object({ ts: z.number(), level: z.string(), message: z.string(), step: z.string() })),
});

export const route = defineRoute({
  name: "list-workflow-runs",
  method: "GET",
  path: "/v1/workflows/{workflow_id}/runs",
  summary: "The runs of a workflow, newest first, with how each ended (beyond the spec)",
  access: { resources: "read" },
  params: z.object({ workflow_id: idParam(ID_PREFIXES.workflow) }),
  query: pageParamsSchema,
  response: paginated(workflowRunSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkflowRuns(deps, caller, params.workflow_id, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
