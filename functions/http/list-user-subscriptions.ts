import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listUserSubscriptions } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";
import { subscriptionSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "list-user-subscriptions",
  method: "GET",
  path: "/v1/users/me/subscriptions",
  summary: "The subscriptions the caller made, newest first",
  access: { resources: "read" },
  query: pageParamsSchema,
  response: paginated(subscriptionSchema),
  run: async (deps, { caller, query }) => listUserSubscriptions(deps, caller, toPageQuery(query)),
});

export const handler = lambdaHandler(route);
