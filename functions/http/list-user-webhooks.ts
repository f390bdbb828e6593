import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listWebhooks } from "#core/webhooks";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";
import { webhookSchema } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "list-user-webhooks",
  method: "GET",
  path: "/v1/users/me/webhooks",
  summary: "The caller's webhooks, newest first (without their signing secrets)",
  access: { resources: "read" },
  query: pageParamsSchema,
  response: paginated(webhookSchema),
  run: async (deps, { caller, query }) => listWebhooks(deps, caller, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
