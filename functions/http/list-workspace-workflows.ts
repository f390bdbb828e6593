import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWorkspaceWorkflows } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated, workspaceIdParams } from "./schemas.ts";
import { workflowSchema } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "list-workspace-workflows",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/workflows",
  summary: "The workflows of a workspace the caller belongs to, newest first",
  access: { resources: "read" },
  params: workspaceIdParams,
  query: pageParamsSchema,
  response: paginated(workflowSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkspaceWorkflows(deps, caller, params.workspace_id, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
