import { z } from "zod";
import { ID_PREFIXES } from "#core/ids";
import { deploySource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentChoiceFields, idParam, single, sourceSchema } from "./schemas.ts";

export const route = defineRoute({
  name: "create-source",
  method: "POST",
  path: "/v1/sources",
  summary: "Deploy a component as an event source: deploy() and activate() run, its timer starts",
  access: { resources: "write", compute: true, secrets: true },
  body: z.object({
    ...componentChoiceFields,
    name: z.string().min(1).max(200).optional(),
    configured_props: z.record(z.string(), z.unknown()).optional(),
    workspace_id: idParam(ID_PREFIXES.workspace).optional(),
  }),
  response: single(sourceSchema),
  run: async (deps, { caller, body }) => ({ data: await deploySource(deps, caller, body) }),
});

export const handler = lambdaHandler(route);
