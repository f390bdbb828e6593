import * as z from "zod";
import { part as host } from "#aws-parts/host";
import { part as tables } from "#aws-parts/tables";
import { componentView, createComponent } from "#core/components";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import {
  componentFilesFields,
  componentSchema,
  single,
  workspaceChoiceFields,
  workspaceChoiceQuery,
} from "./schemas.ts";
import { queryOrBody } from "./subscription-schemas.ts";

export const route = defineRoute({
  name: "create-component",
  method: "POST",
  path: "/v1/components",
  summary: "Save a component from its code or a URL; its metadata is read in the sandbox",
  access: { resources: "write", compute: "describe" },
  query: workspaceChoiceQuery,
  body: z.object({
    component_code: z.string().optional(),
    ...componentFilesFields,
    component_url: z.string().max(2048).optional(),
    ...workspaceChoiceFields,
  }),
  response: single(componentSchema),
  run: async (deps, { caller, query, body }) => {
    const workspace = queryOrBody(query, { org_id: body.org_id, workspace_id: body.workspace_id });
    return { data: componentView(await createComponent(deps, caller, { ...body, ...workspace })) };
  },
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, tables });
