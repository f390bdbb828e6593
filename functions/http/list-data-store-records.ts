import { part as tables } from "#aws-parts/tables";
import { DATA_STORE_KEY_MAX_BYTES, listDataStoreRecords } from "#core/data-stores";
import { decodeCursor, PAGE_LIMIT_DEFAULT, pageParamsSchema } from "#core/pagination";
import { dataStoreIdParams, dataStoreRecordSchema } from "./data-store-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";

/** Records are in key order, so a page only goes forward: `after` the last key of the page before. */
const recordsQuery = pageParamsSchema.pick({ limit: true, after: true }).strict();

export const route = defineRoute({
  name: "list-data-store-records",
  method: "GET",
  path: "/v1/data_stores/{id}/records",
  summary: "The live records of a data store of the caller's workspace, in key order",
  access: { resources: "read" },
  params: dataStoreIdParams,
  query: recordsQuery,
  response: paginated(dataStoreRecordSchema),
  run: async (deps, { caller, params, query }) =>
    listDataStoreRecords(deps, caller, params.id, {
      limit: query.limit ?? PAGE_LIMIT_DEFAULT,
      ...(query.after === undefined
        ? {}
        : { after: decodeCursor(query.after, "after", { maxKeyBytes: DATA_STORE_KEY_MAX_BYTES, allowEmpty: true }) }),
    }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
