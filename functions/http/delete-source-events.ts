import * as z from "zod";
import { part as delays } from "#aws-parts/delays";
import { part as purger } from "#aws-parts/purger";
import { part as tables } from "#aws-parts/tables";
import { deleteSourceEvents } from "#core/source-events";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, sourceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "delete-source-events",
  method: "DELETE",
  path: "/v1/sources/{id}/events",
  summary:
    "Delete a source's events: all, from start_id to the newest, from the oldest to end_id, or the inclusive range (202; space is reclaimed in the background)",
  access: { resources: "write", eventPurges: true },
  params: sourceIdParams,
  query: z.object({
    start_id: z.string().optional(),
    end_id: z.string().optional(),
    event_name: z.string().optional(),
  }),
  successStatus: 202,
  response: single(
    z.object({
      source_id: z.string(),
      start_id: z.string().nullable(),
      end_id: z.string().nullable(),
      event_name: z.string().nullable(),
    }),
  ),
  run: async (deps, { caller, params, query }) => ({ data: await deleteSourceEvents(deps, caller, params.id, query) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { delays, purger, tables });
