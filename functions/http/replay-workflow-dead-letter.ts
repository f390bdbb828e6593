import * as z from "zod";
import { part as deliveries } from "#aws-parts/deliveries";
import { part as tables } from "#aws-parts/tables";
import { replayWorkflowDeadLetter } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, single } from "./schemas.ts";

export const route = defineRoute({
  name: "replay-workflow-dead-letter",
  method: "POST",
  path: "/v1/workflows/{workflow_id}/dead_letters/{delivery_id}/replay",
  summary: "Queue a workflow's failed send again, under the same delivery id, with a fresh set of attempts",
  access: { resources: "write", deliveries: true },
  params: z.object({ workflow_id: idParam(ID_PREFIXES.workflow), delivery_id: idParam(ID_PREFIXES.delivery) }),
  response: single(z.object({ id: z.string(), workflow_id: z.string(), replayed: z.literal(true) })),
  run: async (deps, { caller, params }) => ({
    data: await replayWorkflowDeadLetter(deps, caller, params.workflow_id, params.delivery_id),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { deliveries, tables });
