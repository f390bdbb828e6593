import { part as tables } from "#aws-parts/tables";
import { getWorkspace } from "#core/workspaces";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, workspaceIdParams, workspaceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "get-workspace",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}",
  summary: "A workspace the caller belongs to, with its current credit usage",
  access: { resources: "read" },
  params: workspaceIdParams,
  response: single(workspaceSchema),
  run: async (deps, { caller, params }) => ({ data: await getWorkspace(deps, caller, params.workspace_id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
