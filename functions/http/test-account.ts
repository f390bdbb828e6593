import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { testAccount } from "#core/account-checks";
import { accountIdParams, accountSchema } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";

export const route = defineRoute({
  name: "test-account",
  method: "POST",
  path: "/v1/accounts/{id}/test",
  summary:
    "Run the app's test request with the account's credentials (refreshed first when they expire) and store the verdict: answers the account's metadata with healthy",
  access: { resources: "write", secrets: "seal" },
  params: accountIdParams,
  response: single(accountSchema),
  run: async (deps, { caller, params }) => ({ data: await testAccount(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
