import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listUserSources } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated, sourceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "list-user-sources",
  method: "GET",
  path: "/v1/users/me/sources",
  summary: "The sources the caller deployed, newest first",
  access: { resources: "read" },
  query: pageParamsSchema,
  response: paginated(sourceSchema),
  run: async (deps, { caller, query }) => listUserSources(deps, caller, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
