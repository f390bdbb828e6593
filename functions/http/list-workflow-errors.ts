import { part as tables } from "#aws-parts/tables";
import { listWorkflowEvents } from "#core/workflow-events";
import { lambdaHandler } from "./lambda.ts";
import { workflowEventsQuery } from "./list-workflow-events.ts";
import { defineRoute } from "./route.ts";
import { eventSummarySchema, paginated } from "./schemas.ts";
import { workflowIdParams } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "list-workflow-errors",
  method: "GET",
  path: "/v1/workflows/{workflow_id}/$errors/event_summaries",
  summary: "The last errors of a workflow's runs ($errors), newest first (at most 100 per page)",
  access: { resources: "read" },
  params: workflowIdParams,
  query: workflowEventsQuery,
  response: paginated(eventSummarySchema),
  run: async (deps, { caller, params, query }) => listWorkflowEvents(deps, caller, params.workflow_id, query, "errors"),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
