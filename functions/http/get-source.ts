import { part as tables } from "#aws-parts/tables";
import { getSource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, sourceIdParams, sourceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "get-source",
  method: "GET",
  path: "/v1/sources/{id}",
  summary: "A source of a workspace the caller belongs to",
  access: { resources: "read" },
  params: sourceIdParams,
  response: single(sourceSchema),
  run: async (deps, { caller, params }) => ({ data: await getSource(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
