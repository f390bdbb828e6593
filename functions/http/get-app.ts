import { part as tables } from "#aws-parts/tables";
import { getApp } from "#core/apps";
import { appIdParams, appSchema } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";

export const route = defineRoute({
  name: "get-app",
  method: "GET",
  path: "/v1/apps/{id}",
  summary: "One app of the catalog, by app_ id or name_slug (never its OAuth client secret)",
  access: { resources: "read" },
  params: appIdParams,
  response: single(appSchema),
  run: async (deps, { params }) => ({ data: getApp(deps, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
