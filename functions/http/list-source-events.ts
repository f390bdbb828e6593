import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { CHANNEL_NAME_MAX_LENGTH } from "#core/channels";
import { pageParamsSchema } from "#core/pagination";
import { listSourceEvents } from "#core/source-events";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { eventSummarySchema, paginated, sourceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "list-source-events",
  method: "GET",
  path: "/v1/sources/{id}/event_summaries",
  summary: "The last events a source emitted, newest first (at most 100 per page; expand=event for full data)",
  access: { resources: "read" },
  params: sourceIdParams,
  query: pageParamsSchema.extend({
    expand: z.string().optional(),
    event_name: z.string().max(CHANNEL_NAME_MAX_LENGTH).optional(),
  }),
  response: paginated(eventSummarySchema),
  run: async (deps, { caller, params, query }) => listSourceEvents(deps, caller, params.id, query),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
