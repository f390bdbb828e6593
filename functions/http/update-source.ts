import * as z from "zod";
import { updateSource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentChoiceFields, single, sourceIdParams, sourceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "update-source",
  method: "PUT",
  path: "/v1/sources/{id}",
  summary:
    "Update a source: deactivate() runs, code, props, name and active are swapped, activate() runs (on AWS, what does not fit in the request finishes in the background)",
  access: { resources: "write", compute: "deploy", secrets: "seal" },
  params: sourceIdParams,
  body: z.object({
    ...componentChoiceFields,
    name: z.string().min(1).max(200).optional(),
    configured_props: z.record(z.string(), z.unknown()).optional(),
    active: z.boolean().optional(),
  }),
  response: single(sourceSchema),
  run: async (deps, { caller, params, body, answerByMs }) => ({
    data: await updateSource(deps, caller, params.id, body, answerByMs === undefined ? {} : { answerByMs }),
  }),
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
