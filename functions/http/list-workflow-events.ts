import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema } from "#core/pagination";
import { listWorkflowEvents } from "#core/workflow-events";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { eventSummarySchema, paginated } from "./schemas.ts";
import { workflowIdParams } from "./workflow-schemas.ts";

/** The query of a workflow's event lists: paging and `expand`; the channel is the route's. */
export const workflowEventsQuery = pageParamsSchema.extend({ expand: z.string().optional() });

export const route = defineRoute({
  name: "list-workflow-events",
  method: "GET",
  path: "/v1/workflows/{workflow_id}/event_summaries",
  summary: "The last events a workflow emitted ($.send.emit), newest first (at most 100 per page)",
  access: { resources: "read" },
  params: workflowIdParams,
  query: workflowEventsQuery,
  response: paginated(eventSummarySchema),
  run: async (deps, { caller, params, query }) => listWorkflowEvents(deps, caller, params.workflow_id, query, "emits"),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
