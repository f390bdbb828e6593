import { z } from "zod";
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
  body: z.object({
    ...componentChoiceFields,
    name: z.string().min(1).max(200).optional(),
    configured_props: z.record(z.string(), z.unknown()).optional(),
    ...workspaceChoiceFields,
  }),
  response: single(sourceSchema),
  run: async (deps, { caller, query, body }) => {
    const workspace = queryOrBody(query, { org_id: body.org_id, workspace_id: body.workspace_id });
    return { data: await deploySource(deps, caller, { ...body, ...workspace }) };
  },
});

export const handler = lambdaHandler(route);
