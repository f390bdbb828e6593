import * as z from "zod";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { finishConnect, OAUTH_CALLBACK_PATH } from "#core/oauth-connect";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute, type HtmlPage } from "./route.ts";

/** What a provider's redirect may carry; lenient, so that a bad one still gets a page, not JSON. */
const param = z.string().max(4096).optional();

export const route = defineRoute({
  name: "finish-account-connect",
  method: "GET",
  path: OAUTH_CALLBACK_PATH,
  summary:
    "Where an OAuth provider sends the browser back: exchanges the code, creates the account and shows a page saying so (no API key: the one-time state is the proof)",
  auth: false,
  answers: "html",
  access: { resources: "write", secrets: "seal" },
  query: z.object({ code: param, state: param, error: param, error_description: param }).loose(),
  response: z.string().meta({ description: "An HTML page" }),
  run: async (deps, { query }): Promise<HtmlPage> => finishConnect(deps, query),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { secrets, tables });
