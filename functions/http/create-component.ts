import { z } from "zod";
import { componentView, createComponent } from "#core/components";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentSchema, single } from "./schemas.ts";

export const route = defineRoute({
  name: "create-component",
  method: "POST",
  path: "/v1/components",
  summary: "Save a component from its code or a URL; its metadata is read in the sandbox",
  access: { resources: "write", compute: true },
  body: z.object({
    component_code: z.string().optional(),
    component_url: z.string().max(2048).optional(),
  }),
  response: single(componentSchema),
  run: async (deps, { caller, body }) => ({ data: componentView(await createComponent(deps, caller, body)) }),
});

export const handler = lambdaHandler(route);
