import { part as bus } from "#aws-parts/bus";
import { part as delays } from "#aws-parts/delays";
import { part as host } from "#aws-parts/host";
import { part as pauses } from "#aws-parts/pauses";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { part as timers } from "#aws-parts/timers";
import { part as trees } from "#aws-parts/trees";
import { createWorkflow } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single, workspaceChoiceQuery } from "./schemas.ts";
import { queryOrBody } from "./subscription-schemas.ts";
import { createWorkflowBody, workflowSchema } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "create-workflow",
  method: "POST",
  path: "/v1/workflows",
  summary:
    "Create a workflow: its steps' code is saved and built, its triggers stored (inactive unless settings.auto_deploy)",
  conflict:
    "external_id already names another workflow of the workspace, or the same external_id with another definition",
  // A failure once the workflow is stored removes it whole (`removeWorkflow` of #core/workflows),
  // which asks the store for its paused runs (none yet, but the port must be there).
  access: { resources: "write", compute: "deploy", secrets: "seal", pausedRuns: true },
  query: workspaceChoiceQuery,
  body: createWorkflowBody,
  response: single(workflowSchema),
  run: async (deps, { caller, query, body, answerByMs }) => {
    const workspace = queryOrBody(query, { org_id: body.org_id, workspace_id: body.workspace_id });
    const options = answerByMs === undefined ? {} : { answerByMs };
    return { data: await createWorkflow(deps, caller, { ...body, ...workspace }, options) };
  },
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  bus,
  delays,
  host,
  pauses,
  secrets,
  tables,
  timers,
  trees,
});
