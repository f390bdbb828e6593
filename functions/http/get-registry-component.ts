import * as z from "zod";
import { part as host } from "#aws-parts/host";
import { part as tables } from "#aws-parts/tables";
import { componentView, registryComponent } from "#core/components";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentSchema, single } from "./schemas.ts";

export const route = defineRoute({
  name: "get-registry-component",
  method: "GET",
  path: "/v1/components/registry/{key}",
  summary: "A component shipped in Sluice's registry, by key",
  access: { resources: "write", compute: "describe" },
  params: z.object({ key: z.string().min(1).max(128) }),
  response: single(componentSchema),
  run: async (deps, { params }) => ({ data: componentView(await registryComponent(deps, params.key)) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, tables });
