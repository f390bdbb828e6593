import * as z from "zod";
import { part as deliveries } from "#aws-parts/deliveries";
import { part as tables } from "#aws-parts/tables";
import { REPLAY_BATCH_MAX, replayAllWorkflowDeadLetters } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { lambdaHandler } from "./lambda.ts";
import { replayLimitQuery } from "./replay-dead-letters.ts";
import { defineRoute } from "./route.ts";
import { idParam, single } from "./schemas.ts";

export const route = defineRoute({
  name: "replay-workflow-dead-letters",
  method: "POST",
  path: "/v1/workflows/{workflow_id}/dead_letters/replay",
  summary: `Queue a workflow's oldest failed sends (at most ${REPLAY_BATCH_MAX} per call) again; call again while remaining > 0`,
  access: { resources: "write", deliveries: true },
  params: z.object({ workflow_id: idParam(ID_PREFIXES.workflow) }),
  query: replayLimitQuery,
  response: single(z.object({ workflow_id: z.string(), replayed: z.number().int(), remaining: z.number().int() })),
  run: async (deps, { caller, params, query }) => ({
    data: await replayAllWorkflowDeadLetters(deps, caller, params.workflow_id, query.limit),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { deliveries, tables });
