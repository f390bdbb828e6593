import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { reloadComponentProps } from "#core/dynamic-props";
import { reloadPropsBody, reloadPropsResponse } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

export const route = defineRoute({
  name: "reload-component-props",
  method: "POST",
  path: "/v1/components/props",
  summary: "The prop set additionalProps() makes on the configured props, merged with the static props",
  // Opens the credentials of the accounts the configured app props name (`$auth`).
  access: { resources: "write", compute: "probe", secrets: "open" },
  body: reloadPropsBody,
  response: reloadPropsResponse,
  run: (deps, { caller, body }) => reloadComponentProps(deps, caller, body),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, secrets, tables });
