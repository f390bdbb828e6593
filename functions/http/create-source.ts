import * as z from "zod";
import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { part as trees } from "#aws-parts/trees";
import { IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_MAX_LENGTH } from "#core/idempotency-keys";
import { deploySource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import {
  componentChoiceFields,
  single,
  sourceNameField,
  sourceSchema,
  workspaceChoiceFields,
  workspaceChoiceQuery,
} from "./schemas.ts";
import { queryOrBody } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-source",
  method: "POST",
  path: "/v1/sources",
  summary: "Deploy a component as an event source: deploy() and activate() run, its timer starts",
  conflict: "A source created with this Idempotency-Key is being deleted; retry when it is gone",
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
    name: sourceNameField,
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

export const handler = /* @__PURE__ */ lambdaHandler(route, { bus, delays, host, secrets, tables, timers, trees });
