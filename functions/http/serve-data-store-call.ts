import * as z from "zod";
import { part as files } from "#aws-parts/files";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { DATA_STORE_CALLS_PATH, serveGrantedCall } from "#core/data-stores";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

/** A grant is a sealed text of a few hundred bytes; bounded so garbage costs little to refuse. */
const GRANT_MAX_CHARS = 16 * 1024;

export const route = defineRoute({
  name: "serve-data-store-call",
  method: "POST",
  path: DATA_STORE_CALLS_PATH,
  summary:
    "One data store call of a running component, sent by its runtime on AWS with its run's grant (no API key: the grant is the authority)",
  // The grant, sealed by Sluice, names the run's stores; an API key would be the code's to misuse.
  auth: false,
  access: { resources: "write", secrets: "open", files: true },
  body: z.object({ grant: z.string().min(1).max(GRANT_MAX_CHARS), call: z.unknown() }),
  response: z.union([
    z.object({ ok: z.literal(true), value: z.unknown().optional() }),
    z.object({ ok: z.literal(false), error: z.object({ name: z.string(), message: z.string() }) }),
  ]),
  run: async (deps, { body }) => serveGrantedCall(deps, body.grant, body.call),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { files, secrets, tables });
