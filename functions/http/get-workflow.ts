import * as z from "zod";
import { part as tables } from "#aws-parts/tables";
import { getWorkflow } from "#core/workflows";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";
import { single } from "./schemas.ts";
import { workflowIdParams, workflowSchema } from "./workflow-schemas.ts";

export const route = defineRoute({
  name: "get-workflow",
  method: "GET",
  path: "/v1/workflows/{workflow_id}",
  summary: "A workflow of a workspace the caller belongs to",
  access: { resources: "read" },
  params: workflowIdParams,
  query: z.object({
    org_id: z.string().max(128).optional().meta({ description: "When given, the workflow's workspace (else 404)" }),
  }),
  response: single(workflowSchema),
  run: async (deps, { caller, params, query }) => ({
    data: await getWorkflow(deps, caller, params.workflow_id, query.org_id),
  }),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { tables });
