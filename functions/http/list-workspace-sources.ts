import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWorkspaceSources } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated, sourceSchema, workspaceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "list-workspace-sources",
  method: "GET",
  path: "/v1/orgs/{workspace_id}/sources",
  summary: "The sources of a workspace the caller belongs to, newest first",
  access: { resources: "read" },
  params: workspaceIdParams,
  query: pageParamsSchema,
  response: paginated(sourceSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkspaceSources(deps, caller, params.workspace_id, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
