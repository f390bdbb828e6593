import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { createWebhook } from "#core/webhooks";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { queryOrBody, webhookFields, webhookWithSecretSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-webhook",
  method: "POST",
  path: "/v1/webhooks",
  summary:
    "Create a webhook (parameters in the query string or a JSON body); the answer holds its signing secret, shown only this once",
  access: { resources: "write", secrets: "seal" },
  query: webhookFields,
  body: webhookFields,
  response: single(webhookWithSecretSchema),
  run: async (deps, { caller, query, body }) => ({ data: await createWebhook(deps, caller, queryOrBody(query, body)) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
