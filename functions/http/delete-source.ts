import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { deleteSource } from "#core/sources";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single, sourceIdParams } from "./schemas.ts";

export const route = defineRoute({
  name: "delete-source",
  method: "DELETE",
  path: "/v1/sources/{id}",
  summary: "Delete a source: deactivate() runs, then the source, its timer, code and events are removed",
  access: { resources: "write", compute: "remove", secrets: "seal" },
  params: sourceIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params, answerByMs }) => ({
    data: await deleteSource(deps, caller, params.id, answerByMs === undefined ? {} : { answerByMs }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { bus, delays, host, secrets, tables, timers });
