import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { rotateWebhookSecret } from "#core/webhooks";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { webhookIdParams, webhookWithSecretSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "rotate-webhook-secret",
  method: "POST",
  path: "/v1/webhooks/{id}/rotate_secret",
  summary:
    "Replace a webhook's signing secret at once; the answer holds the new one, shown only this once, and every later delivery is signed with it",
  access: { resources: "write", secrets: "seal" },
  params: webhookIdParams,
  response: single(webhookWithSecretSchema),
  run: async (deps, { caller, params }) => ({ data: await rotateWebhookSecret(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
