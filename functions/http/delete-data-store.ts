import { part as tables } from "#aws-parts/tables";
import { deleteDataStore } from "#core/data-stores";
import { dataStoreIdParams } from "./data-store-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single } from "./schemas.ts";

export const route = defineRoute({
  name: "delete-data-store",
  method: "DELETE",
  path: "/v1/data_stores/{id}",
  summary: "Delete a data store of the caller's workspace with all its records",
  access: { resources: "write" },
  params: dataStoreIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params }) => ({ data: await deleteDataStore(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
