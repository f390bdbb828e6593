import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { listWorkflowDeadLetters, REDACTED } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, paginated } from "./schemas.ts";

const values = z.record(z.string(), z.string()).nullable();

export const workflowDeadLetterSchema = z.object({
  id: z.string().meta({ description: "The delivery id (dlv_), sent as x-sluice-delivery-id on every attempt" }),
  workflow_id: z.string(),
  run_id: z.string().meta({ description: "The run (run_) whose step sent it" }),
  type: z.enum(["http", "s3"]).meta({ description: "$.send.http or $.send.s3" }),
  request: z
    .object({
      method: z.string(),
      url: z.string(),
      headers: values,
      params: values,
      auth: z.object({ username: z.string(), password: z.literal(REDACTED) }).nullable(),
      data: z.unknown(),
    })
    .nullable()
    .meta({
      description: `The $.send.http request; credentials (auth's password, the values of headers and query parameters named like auth, key, token, secret, cookie...) read "${REDACTED}" here but are sent as they were on replay`,
    }),
  s3: z.object({ bucket: z.string(), key: z.string(), payload: z.unknown() }).nullable(),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  created_at: z.number().int(),
  failed_at: z.number().int(),
});

export const route = defineRoute({
  name: "list-workflow-dead-letters",
  method: "GET",
  path: "/v1/workflows/{workflow_id}/dead_letters",
  summary:
    "Sends ($.send.http, $.send.s3) of a workflow's runs that failed every attempt, newest first (beyond the spec)",
  access: { resources: "read" },
  params: z.object({ workflow_id: idParam(ID_PREFIXES.workflow) }),
  query: pageParamsSchema,
  response: paginated(workflowDeadLetterSchema),
  run: async (deps, { caller, params, query }) =>
    listWorkflowDeadLetters(deps, caller, params.workflow_id, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
