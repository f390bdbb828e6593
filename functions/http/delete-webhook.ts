import { part as tables } from "#aws-parts/tables";
import { deleteWebhook } from "#core/webhooks";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single } from "./schemas.ts";
import { webhookIdParams } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "delete-webhook",
  method: "DELETE",
  path: "/v1/webhooks/{id}",
  summary: "Delete one of the caller's webhooks with its subscriptions, auto subscriptions and dead letters",
  access: { resources: "write" },
  params: webhookIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params }) => ({ data: await deleteWebhook(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
