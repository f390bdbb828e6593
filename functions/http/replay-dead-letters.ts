import * as z from "zod";
import { part as deliveries } from "#aws-parts/deliveries";
import { part as tables } from "#aws-parts/tables";
import { REPLAY_BATCH_MAX, replayAllDeadLetters } from "#core/dead-letters";
import { ID_PREFIXES } from "#core/ids";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { idParam, single } from "./schemas.ts";

/** `?limit=`: how many of the oldest dead letters one call replays. */
export const replayLimitQuery = z.object({
  limit: z.coerce
    .number({ error: "must be an integer" })
    .int("must be an integer")
    .min(1, "must be at least 1")
    .max(REPLAY_BATCH_MAX, `must be at most ${REPLAY_BATCH_MAX}`)
    .optional(),
});

export const route = defineRoute({
  name: "replay-dead-letters",
  method: "POST",
  path: "/v1/webhooks/{id}/dead_letters/replay",
  summary: `Queue a webhook's oldest dead letters (at most ${REPLAY_BATCH_MAX} per call) for delivery again; call again while remaining > 0`,
  access: { resources: "write", deliveries: true },
  params: z.object({ id: idParam(ID_PREFIXES.webhook) }),
  query: replayLimitQuery,
  response: single(z.object({ webhook_id: z.string(), replayed: z.number().int(), remaining: z.number().int() })),
  run: async (deps, { caller, params, query }) => ({
    data: await replayAllDeadLetters(deps, caller, params.id, query.limit),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { deliveries, tables });
