import { part as tables } from "#aws-parts/tables";
import { asksForPage, pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWorkspaceSubscriptions } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { workspaceIdParams } from "./schemas.ts";
import { subscriptionListSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "list-workspace-subscriptions",
  method: "GET",
  path: "/v1/workspaces/{workspace_id}/subscriptions",
  summary:
    "The subscriptions listed under a workspace the caller belongs to (those whose listener it owns), newest first: all of them as {data} (at most 1,000, else 400), or a page with page_info when limit, after or before is given",
  access: { resources: "read" },
  params: workspaceIdParams,
  query: pageParamsSchema,
  response: subscriptionListSchema,
  run: async (deps, { caller, params, query }) =>
    listWorkspaceSubscriptions(deps, caller, params.workspace_id, asksForPage(query) ? toPageQuery(query) : undefined),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
