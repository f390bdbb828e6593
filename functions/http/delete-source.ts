import { deleteSource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single, sourceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "delete-source",
  method: "DELETE",
  path: "/v1/sources/{id}",
  summary: "Delete a source: deactivate() runs, then the source, its timer, code and events are removed",
  access: { resources: "write", compute: "remove", secrets: "seal" },
  params: sourceIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params }) => ({ data: await deleteSource(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  bus: () => import("#adapters/aws/parts/bus"),
  delays: () => import("#adapters/aws/parts/delays"),
  host: () => import("#adapters/aws/parts/host"),
  secrets: () => import("#adapters/aws/parts/secrets"),
  tables: () => import("#adapters/aws/parts/tables"),
  timers: () => import("#adapters/aws/parts/timers"),
});
