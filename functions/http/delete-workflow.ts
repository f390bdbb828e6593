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
  access: { resources: "write", compute: "remove", secrets: "seal" },
  params: workflowIdParams,
  response: single(deletedSchema),
  run: async (deps, { caller, params }) => ({ data: await deleteWorkflow(deps, caller, params.workflow_id) }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  bus: () => import("#adapters/aws/parts/bus"),
  delays: () => import("#adapters/aws/parts/delays"),
  host: () => import("#adapters/aws/parts/host"),
  secrets: () => import("#adapters/aws/parts/secrets"),
  tables: () => import("#adapters/aws/parts/tables"),
  timers: () => import("#adapters/aws/parts/timers"),
});
