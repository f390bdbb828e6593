import { part as tables } from "#aws-parts/tables";
import { listUserAccounts } from "#core/connected-account-api";
import { accountListQuery, accountPageOf, accountSchema } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";

export const route = defineRoute({
  name: "list-user-accounts",
  method: "GET",
  path: "/v1/users/me/accounts",
  summary: "The connected accounts of the caller's first workspace, oldest first, with their metadata",
  access: { resources: "read" },
  query: accountListQuery,
  response: paginated(accountSchema),
  run: async (deps, { caller, query }) => listUserAccounts(deps, caller, accountPageOf(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
