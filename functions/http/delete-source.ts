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

export const handler = lambdaHandler(route);
