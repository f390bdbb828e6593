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
  access: { resources: "write", compute: "deploy", secrets: "seal" },
  params: workflowIdParams,
  body: updateWorkflowBody,
  response: single(workflowSchema),
  run: async (deps, { caller, params, body, answerByMs }) => ({
    data: await updateWorkflow(deps, caller, params.workflow_id, body, answerByMs === undefined ? {} : { answerByMs }),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  bus: () => import("#adapters/aws/parts/bus"),
  delays: () => import("#adapters/aws/parts/delays"),
  host: () => import("#adapters/aws/parts/host"),
  secrets: () => import("#adapters/aws/parts/secrets"),
  tables: () => import("#adapters/aws/parts/tables"),
  timers: () => import("#adapters/aws/parts/timers"),
  trees: () => import("#adapters/aws/parts/trees"),
});
