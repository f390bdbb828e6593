import * as z from "zod";
import { part as deliveries } from "#aws-parts/deliveries";
import { part as tables } from "#aws-parts/tables";
import { replayDeadLetter } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, single } from "./schemas.ts";

export const route = defineRoute({
  name: "replay-dead-letter",
  method: "POST",
  path: "/v1/webhooks/{id}/dead_letters/{delivery_id}/replay",
  summary: "Queue a dead letter for delivery again, under the same delivery id, with a fresh set of attempts",
  access: { resources: "write", deliveries: true },
  params: z.object({ id: idParam(ID_PREFIXES.webhook), delivery_id: idParam(ID_PREFIXES.delivery) }),
  response: single(z.object({ id: z.string(), webhook_id: z.string(), replayed: z.literal(true) })),
  run: async (deps, { caller, params }) => ({
    data: await replayDeadLetter(deps, caller, params.id, params.delivery_id),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { deliveries, tables });
