import { part as tables } from "#aws-parts/tables";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { listUserWorkflows } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";
import { workflowSchema } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "list-user-workflows",
  method: "GET",
  path: "/v1/users/me/workflows",
  summary: "The workflows the caller created, newest first",
  access: { resources: "read" },
  query: pageParamsSchema,
  response: paginated(workflowSchema),
  run: async (deps, { caller, query }) => listUserWorkflows(deps, caller, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
