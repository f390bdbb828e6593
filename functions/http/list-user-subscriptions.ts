import { part as tables } from "#aws-parts/tables";
import { asksForPage, pageParamsSchema, toPageQuery } from "#core/pagination";
import { listUserSubscriptions } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { subscriptionListSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "list-user-subscriptions",
  method: "GET",
  path: "/v1/users/me/subscriptions",
  summary:
    "The subscriptions the caller made, newest first: all of them as {data} (at most 1,000, else 400), or a page with page_info when limit, after or before is given",
  access: { resources: "read" },
  query: pageParamsSchema,
  response: subscriptionListSchema,
  run: async (deps, { caller, query }) =>
    listUserSubscriptions(deps, caller, asksForPage(query) ? toPageQuery(query) : undefined),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
