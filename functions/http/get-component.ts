import * as z from "zod";
import { part as host } from "#aws-parts/host";
import { part as tables } from "#aws-parts/tables";
import { componentView, findComponent } from "#core/components";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentSchema, single } from "./schemas.ts";

export const route = defineRoute({
  name: "get-component",
  method: "GET",
  path: "/v1/components/{key}",
  summary: "A saved component by id (sc_), or the caller's newest component with that key, or a registry one",
  access: { resources: "write", compute: "describe" },
  params: z.object({ key: z.string().min(1).max(128) }),
  response: single(componentSchema),
  run: async (deps, { caller, params }) => ({ data: componentView(await findComponent(deps, caller, params.key)) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, tables });
