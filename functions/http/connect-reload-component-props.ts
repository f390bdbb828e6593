import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { inConnectProject, reloadComponentProps } from "#core/dynamic-props";
import {
  connectComponentGuard,
  connectComponentParams,
  reloadPropsBody,
  reloadPropsResponse,
} from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

/**
 * `POST /v1/components/props` at the hosted Connect API's paths, in the project's workspace:
 * `/v1/connect/{project_id}/{components,actions,triggers}/props`, which answer alike.
 */
export const route = defineRoute({
  name: "connect-reload-component-props",
  method: "POST",
  path: "/v1/connect/{project_id}/{component_kind}/props",
  summary:
    "As POST /v1/components/props, at the Connect API's paths (component_kind: components, actions or triggers): runs in the project's workspace",
  // Opens the credentials of the accounts the configured app props name (`$auth`).
  access: { resources: "write", compute: "probe", secrets: "open" },
  params: connectComponentParams,
  guard: connectComponentGuard("POST", () => "props"),
  body: reloadPropsBody,
  response: reloadPropsResponse,
  run: async (deps, { caller, params, body }) =>
    reloadComponentProps(deps, caller, await inConnectProject(deps, caller, params.project_id, body)),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, secrets, tables });
