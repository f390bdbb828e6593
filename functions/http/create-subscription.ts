import { part as tables } from "#aws-parts/tables";
import { createSubscription } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { queryOrBody, subscriptionFields, subscriptionSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-subscription",
  method: "POST",
  path: "/v1/subscriptions",
  summary:
    "Deliver the events of an emitter's channel to a listener (parameters in the query string or a JSON body); creating the same subscription again answers the first",
  access: { resources: "write" },
  query: subscriptionFields,
  body: subscriptionFields,
  response: single(subscriptionSchema),
  run: async (deps, { caller, query, body }) => ({
    data: await createSubscription(deps, caller, queryOrBody(query, body)),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
