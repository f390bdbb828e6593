import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWorkspaceSubscriptions } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated, workspaceIdParams } from "./schemas.ts";
import { subscriptionSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "list-workspace-subscriptions",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/subscriptions",
  summary:
    "The subscriptions listed under a workspace the caller belongs to (those whose listener it owns), newest first",
  access: { resources: "read" },
  params: workspaceIdParams,
  query: pageParamsSchema,
  response: paginated(subscriptionSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkspaceSubscriptions(deps, caller, params.workspace_id, toPageQuery(query)),
});

export const handler = lambdaHandler(route);
