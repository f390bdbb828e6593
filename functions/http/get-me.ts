import { part as tables } from "#aws-parts/tables";
import { getMe } from "#core/workspaces";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, userSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "get-me",
  method: "GET",
  path: "/v1/users/me",
  summary: "The calling user, with today's usage against the quotas and the user's workspaces",
  access: { resources: "read" },
  response: single(userSchema),
  run: async (deps, { caller }) => ({ data: await getMe(deps, caller) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
