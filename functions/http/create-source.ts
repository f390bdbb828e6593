import * as z from "zod";
import { IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_MAX_LENGTH } from "#core/idempotency-keys";
import { deploySource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentChoiceFields, single, sourceSchema, workspaceChoiceFields, workspaceChoiceQuery } from "./schemas.ts";
import { queryOrBody } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-source",
  method: "POST",
  path: "/v1/sources",
  summary: "Deploy a component as an event source: deploy() and activate() run, its timer starts",
  access: { resources: "write", compute: "deploy", secrets: "seal" },
  query: workspaceChoiceQuery,
  headers: z.object({
    [IDEMPOTENCY_HEADER]: z.string().min(1).max(IDEMPOTENCY_KEY_MAX_LENGTH).optional().meta({
      description:
        "A key of the client's (printable ASCII): a retry with the same key and request answers the same source instead of deploying another, for 24 hours; per user (docs/components.md, Retrying a deploy)",
    }),
  }),
  body: z.object({
    ...componentChoiceFields,
    name: z.string().min(1).max(200).optional(),
    configured_props: z.record(z.string(), z.unknown()).optional(),
    ...workspaceChoiceFields,
  }),
  response: single(sourceSchema),
  run: async (deps, { caller, query, body, idempotencyKey, answerByMs }) => {
    const workspace = queryOrBody(query, { org_id: body.org_id, workspace_id: body.workspace_id });
    const options = {
      ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      ...(answerByMs === undefined ? {} : { answerByMs }),
    };
    return { data: await deploySource(deps, caller, { ...body, ...workspace }, options) };
  },
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  bus: () => import("#adapters/aws/parts/bus"),
  delays: () => import("#adapters/aws/parts/delays"),
  host: () => import("#adapters/aws/parts/host"),
  secrets: () => import("#adapters/aws/parts/secrets"),
  tables: () => import("#adapters/aws/parts/tables"),
  timers: () => import("#adapters/aws/parts/timers"),
  trees: () => import("#adapters/aws/parts/trees"),
});
