import * as z from "zod";
import { part as host } from "#aws-parts/host";
import { part as tables } from "#aws-parts/tables";
import { componentView, findComponent } from "#core/components";
import { connectComponentGuard, connectComponentParams } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { componentSchema, single } from "./schemas.ts";

/**
 * `GET /v1/components/{key}` at the Connect API's paths (its SDK's `components.retrieve`,
 * `actions.retrieve`, `triggers.retrieve`), for a project of the caller's: what a client reads
 * before it configures and runs an action.
 */
export const route = defineRoute({
  name: "connect-get-component",
  method: "GET",
  path: "/v1/connect/{project_id}/{component_kind}/{key}",
  summary:
    "As GET /v1/components/{key}, at the Connect API's paths (component_kind: components, actions or triggers), for a project of the caller's",
  access: { resources: "write", compute: "describe" },
  params: connectComponentParams.extend({ key: z.string().min(1).max(128) }),
  guard: connectComponentGuard("GET", (params) => params.key),
  response: single(componentSchema),
  run: async (deps, { caller, params }) => ({ data: componentView(await findComponent(deps, caller, params.key)) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, tables });
