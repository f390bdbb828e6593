import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { listDeadLetters } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { pageParamsSchema, toPageQuery } from "#core/pagination";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, paginated } from "./schemas.ts";

export const deadLetterSchema = z.object({
  id: z.string().meta({ description: "The delivery id (dlv_), sent as x-sluice-delivery-id on every attempt" }),
  webhook_id: z.string(),
  subscription_ids: z.array(z.string()),
  emitter_id: z.string(),
  event_id: z.string(),
  event_name: z.string(),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  created_at: z.number().int(),
  failed_at: z.number().int(),
  payload: z.unknown(),
});

export const route = defineRoute({
  name: "list-dead-letters",
  method: "GET",
  path: "/v1/webhooks/{id}/dead_letters",
  summary: "Deliveries to a webhook that failed every attempt, newest first, with the payload they carried",
  access: { resources: "read" },
  params: z.object({ id: idParam(ID_PREFIXES.webhook) }),
  query: pageParamsSchema,
  response: paginated(deadLetterSchema),
  run: async (deps, { caller, params, query }) => listDeadLetters(deps, caller, params.id, toPageQuery(query)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
