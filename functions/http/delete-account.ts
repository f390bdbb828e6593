import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { requireAppAccount } from "#core/access";
import { deleteConnectedAccount } from "#core/connected-account-api";
import { accountIdParams } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single } from "./schemas.ts";

export const route = defineRoute({
  name: "delete-account",
  method: "DELETE",
  path: "/v1/accounts/{id}",
  summary: "Delete a connected account; 409 listing the sources and workflows using it, unless force=true",
  conflict:
    "Sources or workflows use the account (they are named); configure them without it, or delete with force=true",
  access: { resources: "write" },
  params: accountIdParams,
  guard: async (deps, { caller, params }) => void (await requireAppAccount(deps, caller, params.id)),
  query: z
    .object({
      force: z
        .enum(["true", "false"], { error: "must be true or false" })
        .optional()
        .meta({ description: "true: delete even while sources or workflows use it" }),
    })
    .strict(),
  response: single(deletedSchema),
  run: async (deps, { caller, params, query }) => ({
    data: await deleteConnectedAccount(deps, caller, params.id, query.force === "true"),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
