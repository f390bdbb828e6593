import * as z from "zod";
import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { part as trees } from "#aws-parts/trees";
import { updateSource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentChoiceFields, single, sourceIdParams, sourceNameField, sourceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "update-source",
  method: "PUT",
  path: "/v1/sources/{id}",
  summary:
    "Update a source: deactivate() runs, code, props, name and active are swapped, activate() runs (on AWS, what does not fit in the request finishes in the background)",
  conflict:
    "The source is still being deployed, updated or deleted, or another request changed it meanwhile; try again",
  access: { resources: "write", compute: "deploy", secrets: "seal" },
  params: sourceIdParams,
  body: z.object({
    ...componentChoiceFields,
    name: sourceNameField,
    configured_props: z.record(z.string(), z.unknown()).optional(),
    active: z.boolean().optional(),
  }),
  response: single(sourceSchema),
  run: async (deps, { caller, params, body, answerByMs }) => ({
    data: await updateSource(deps, caller, params.id, body, answerByMs === undefined ? {} : { answerByMs }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { bus, delays, host, secrets, tables, timers, trees });
