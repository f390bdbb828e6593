import * as z from "zod";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { requireAppAccount } from "#core/access";
import { updateConnectedAccount } from "#core/connected-account-api";
import { accountIdParams, accountNameField, accountSchema, credentialsField } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";

export const route = defineRoute({
  name: "update-account",
  method: "PUT",
  path: "/v1/accounts/{id}",
  summary:
    "Rename an account and/or replace a key app's credentials (all of them); sources use them from their next run",
  conflict: "Another request changed the account meanwhile; try again",
  access: { resources: "write", secrets: "seal" },
  params: accountIdParams,
  guard: async (deps, { caller, params }) => void (await requireAppAccount(deps, caller, params.id)),
  body: z.object({ name: accountNameField.optional(), credentials: credentialsField.optional() }).strict(),
  response: single(accountSchema),
  run: async (deps, { caller, params, body }) => ({
    data: await updateConnectedAccount(deps, caller, params.id, body ?? {}),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
