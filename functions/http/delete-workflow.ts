import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as pauses } from "#aws-parts/pauses";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { deleteWorkflow } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { deletedSchema, single } from "./schemas.ts";
import { workflowIdParams } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "delete-workflow",
  method: "DELETE",
  path: "/v1/workflows/{workflow_id}",
  summary: "Delete a workflow with the sources it deployed, its subscriptions, events, runs and deployment",
  // Deleting a source the workflow deployed runs its deactivate() with its (opened) props.
  conflict: "A trigger's source is still deploying (on AWS); delete once its deploy_state is gone",
  access: { resources: "write", compute: "remove", secrets: "seal", pausedRuns: true },
  params: workflowIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params, answerByMs }) => ({
    data: await deleteWorkflow(deps, caller, params.workflow_id, answerByMs === undefined ? {} : { answerByMs }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { bus, delays, host, pauses, secrets, tables, timers });
