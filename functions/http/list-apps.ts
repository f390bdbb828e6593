import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { listApps } from "#core/apps";
import { decodeCursor, PAGE_LIMIT_DEFAULT } from "#core/pagination";
import { appSchema, forwardPageParams } from "./account-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { paginated } from "./schemas.ts";

const search = z.string().max(200).optional().meta({ description: "Apps whose name_slug or name contains it" });

export const route = defineRoute({
  name: "list-apps",
  method: "GET",
  path: "/v1/apps",
  summary: "The apps accounts can be connected to, by name_slug",
  access: { resources: "read" },
  query: forwardPageParams.extend({ q: search, query: search }).strict(),
  response: paginated(appSchema),
  run: async (deps, { query }) =>
    listApps(deps, {
      limit: query.limit ?? PAGE_LIMIT_DEFAULT,
      after: query.after === undefined ? undefined : decodeCursor(query.after, "after"),
      query: query.q ?? query.query,
    }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
