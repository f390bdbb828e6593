import * as z from "zod";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { requireAppAccount } from "#core/access";
import { getConnectedAccount } from "#core/connected-account-api";
import { accountIdParams, accountSchema } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";

export const route = defineRoute({
  name: "get-account",
  method: "GET",
  path: "/v1/accounts/{id}",
  summary: "A connected account of the caller's workspace; include_credentials=1 adds its credentials",
  // Write and seal: reading an OAuth account's credentials may refresh its token (currentCredentials).
  access: { resources: "write", secrets: "seal" },
  params: accountIdParams,
  guard: async (deps, { caller, params }) => void (await requireAppAccount(deps, caller, params.id)),
  query: z
    .object({
      include_credentials: z
        .enum(["0", "1"], { error: "must be 0 or 1" })
        .optional()
        .meta({ description: "1: add expires_at and credentials" }),
    })
    .strict(),
  response: single(accountSchema),
  run: async (deps, { caller, params, query }) => ({
    data: await getConnectedAccount(deps, caller, params.id, query.include_credentials === "1"),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
