import { part as tables } from "#aws-parts/tables";
import { listProjects } from "#core/workspaces";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { list, projectSchema, workspaceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "list-workspace-projects",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/projects",
  summary: "The projects of a workspace the caller belongs to, oldest first",
  access: { resources: "read" },
  params: workspaceIdParams,
  response: list(projectSchema),
  run: async (deps, { caller, params }) => ({ data: await listProjects(deps, caller, params.workspace_id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
