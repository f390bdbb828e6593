import { part as tables } from "#aws-parts/tables";
import { getWebhook } from "#core/webhooks";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { webhookIdParams, webhookSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "get-webhook",
  method: "GET",
  path: "/v1/webhooks/{id}",
  summary: "One of the caller's webhooks (without its signing secret)",
  access: { resources: "read" },
  params: webhookIdParams,
  response: single(webhookSchema),
  run: async (deps, { caller, params }) => ({ data: await getWebhook(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
