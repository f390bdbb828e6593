import * as z from "zod";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { startConnect } from "#core/oauth-connect";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, workspaceChoiceFields, workspaceChoiceQuery } from "./schemas.ts";
import { queryOrBody } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "connect-account",
  method: "POST",
  path: "/v1/accounts/connect",
  summary:
    "Start connecting an OAuth app: answers the provider's URL to open in a browser; the account exists once the provider redirects back (docs/accounts.md, OAuth)",
  access: { resources: "write", secrets: "seal" },
  query: workspaceChoiceQuery,
  body: z.object({
    app: z.string().min(1).max(200).meta({ description: "The app's name_slug or app_ id; an oauth app" }),
    name: z.string().min(1).max(200).optional().meta({ description: "The account's name (default: the app's)" }),
    ...workspaceChoiceFields,
  }),
  response: single(
    z.object({
      authorize_url: z.string(),
      state: z.string(),
      redirect_uri: z.string(),
      expires_at: z.string(),
      app: z.object({ id: z.string(), name_slug: z.string(), name: z.string() }),
      workspace_id: z.string(),
    }),
  ),
  run: async (deps, { caller, query, body }) => {
    const workspace = queryOrBody(query, { org_id: body.org_id, workspace_id: body.workspace_id });
    return { data: await startConnect(deps, caller, { app: body.app, name: body.name, ...workspace }) };
  },
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
