import { part as tables } from "#aws-parts/tables";
import { createAutoSubscription } from "#core/subscriptions";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { autoSubscriptionFields, autoSubscriptionSchema, queryOrBody } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-auto-subscription",
  method: "POST",
  path: "/v1/auto_subscriptions",
  summary:
    "Subscribe a listener to the $errors or $logs stream of every source the caller creates from now on (existing ones need POST /subscriptions)",
  access: { resources: "write" },
  query: autoSubscriptionFields,
  body: autoSubscriptionFields,
  response: single(autoSubscriptionSchema),
  run: async (deps, { caller, query, body }) => ({
    data: await createAutoSubscription(deps, caller, queryOrBody(query, body)),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
