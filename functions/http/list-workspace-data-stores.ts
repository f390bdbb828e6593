import { part as tables } from "#aws-parts/tables";
import { listWorkspaceDataStores } from "#core/data-stores";
import { dataStoreSchema } from "./data-store-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { list, workspaceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "list-workspace-data-stores",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/data_stores",
  summary: "The data stores of a workspace the caller belongs to, by name",
  access: { resources: "read" },
  params: workspaceIdParams,
  response: list(dataStoreSchema),
  run: async (deps, { caller, params }) => listWorkspaceDataStores(deps, caller, params.workspace_id),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
