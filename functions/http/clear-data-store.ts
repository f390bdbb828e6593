import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { clearDataStore } from "#core/data-stores";
import { dataStoreIdParams } from "./data-store-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";

export const route = defineRoute({
  name: "clear-data-store",
  method: "DELETE",
  path: "/v1/data_stores/{id}/records",
  summary: "Delete every record of a data store of the caller's workspace, keeping the store",
  access: { resources: "write" },
  params: dataStoreIdParams,
  response: single(z.object({ id: z.string(), cleared: z.literal(true) })),
  run: async (deps, { caller, params }) => ({ data: await clearDataStore(deps, caller, params.id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
