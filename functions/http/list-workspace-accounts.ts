import { part as tables } from "#aws-parts/tables";
import { listWorkspaceAccounts } from "#core/connected-account-api";
import { accountItemSchema, accountListQuery, accountPageOf } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated, workspaceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "list-workspace-accounts",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/accounts",
  summary: "The connected accounts of a workspace the caller belongs to, oldest first, as {id, name}",
  access: { resources: "read" },
  params: workspaceIdParams,
  query: accountListQuery,
  response: paginated(accountItemSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkspaceAccounts(deps, caller, params.workspace_id, accountPageOf(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
