import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { requireProject } from "#core/access";
import { configureComponentProp, inConnectProject } from "#core/dynamic-props";
import { configurePropBody, configurePropResponse, connectProjectParams } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

/** `POST /v1/components/configure` at the hosted Connect API's path, in the project's workspace. */
export const route = defineRoute({
  name: "connect-configure-component-prop",
  method: "POST",
  path: "/v1/connect/{project_id}/components/configure",
  summary: "As POST /v1/components/configure, at the Connect API's path: runs in the project's workspace",
  // Opens the credentials of the accounts the configured app props name (`$auth`).
  access: { resources: "write", compute: "probe", secrets: "open" },
  params: connectProjectParams,
  guard: async (deps, { caller, params }) => void (await requireProject(deps, caller, params.project_id)),
  body: configurePropBody,
  response: configurePropResponse,
  run: async (deps, { caller, params, body }) =>
    configureComponentProp(deps, caller, await inConnectProject(deps, caller, params.project_id, body)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, secrets, tables });
