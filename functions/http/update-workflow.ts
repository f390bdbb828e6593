import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { part as trees } from "#aws-parts/trees";
import { updateWorkflow } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { updateWorkflowBody, workflowIdParams, workflowSchema } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "update-workflow",
  method: "PUT",
  path: "/v1/workflows/{workflow_id}",
  summary: "Activate or deactivate a workflow (active), rename it, or replace its steps or triggers",
  conflict:
    "Another request changed the workflow meanwhile (send this one again), its external_id is taken, or a trigger's source is still deploying",
  access: { resources: "write", compute: "deploy", secrets: "seal" },
  params: workflowIdParams,
  body: updateWorkflowBody,
  response: single(workflowSchema),
  run: async (deps, { caller, params, body, answerByMs }) => ({
    data: await updateWorkflow(deps, caller, params.workflow_id, body, answerByMs === undefined ? {} : { answerByMs }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { bus, delays, host, secrets, tables, timers, trees });
