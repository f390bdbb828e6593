import * as z from "zod";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { createKeyAccount } from "#core/connected-account-api";
import { accountNameField, accountSchema, appRef, credentialsField } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, workspaceChoiceFields, workspaceChoiceQuery } from "./schemas.ts";

export const route = defineRoute({
  name: "create-account",
  method: "POST",
  path: "/v1/accounts",
  summary: "Connect an account of a key app (an OAuth app connects with POST /v1/accounts/connect)",
  conflict: "The workspace has as many accounts as it may have; delete one first",
  access: { resources: "write", secrets: "seal" },
  query: workspaceChoiceQuery,
  body: z.object({
    app: appRef.meta({ description: "The app: app_ id or name_slug" }),
    name: accountNameField.optional(),
    credentials: credentialsField.optional(),
    ...workspaceChoiceFields,
  }),
  response: single(accountSchema),
  run: async (deps, { caller, query, body }) => ({
    data: await createKeyAccount(deps, caller, {
      ...body,
      org_id: query.org_id ?? body.org_id,
      workspace_id: query.workspace_id ?? body.workspace_id,
    }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
