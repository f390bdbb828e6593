import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { requireProject } from "#core/access";
import { inConnectProject } from "#core/dynamic-props";
import { runAction } from "#core/run-action";
import { connectProjectParams, runActionBody, runActionResponse } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

/**
 * The Connect API's run action: one action run on its own, in the project's workspace, answered
 * with what it exported and returned and its console lines (`{exports, os, ret}`).
 */
export const route = defineRoute({
  name: "connect-run-action",
  method: "POST",
  path: "/v1/connect/{project_id}/actions/run",
  summary:
    "Runs an action once, outside any workflow, in the project's workspace: answers its exports, its return value (ret) and its console lines (os)",
  // Opens the credentials of the accounts its app props name (`$auth`), and runs its code.
  access: { resources: "write", compute: "run", secrets: "open" },
  params: connectProjectParams,
  guard: async (deps, { caller, params }) => void (await requireProject(deps, caller, params.project_id)),
  body: runActionBody,
  response: runActionResponse,
  run: async (deps, { caller, params, body }) =>
    runAction(deps, caller, await inConnectProject(deps, caller, params.project_id, body), params.project_id),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, secrets, tables });
