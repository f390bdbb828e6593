import { part as tables } from "#aws-parts/tables";
import { deleteSubscription } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single } from "./schemas.ts";
import { queryOrBody, subscriptionFields } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "delete-subscription",
  method: "DELETE",
  path: "/v1/subscriptions",
  summary:
    "Delete the subscription named by the parameters of its creation (an empty event_name for the default channel); 404 when there is none",
  access: { resources: "write" },
  query: subscriptionFields,
  body: subscriptionFields,
  response: single(deletedSchema),
  run: async (deps, { caller, query, body }) => ({
    data: await deleteSubscription(deps, caller, queryOrBody(query, body)),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
