import { part as host } from "#aws-parts/host";
import { part as secrets } from "#aws-parts/secrets";
import { part as tables } from "#aws-parts/tables";
import { configureComponentProp } from "#core/dynamic-props";
import { configurePropBody, configurePropResponse } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

export const route = defineRoute({
  name: "configure-component-prop",
  method: "POST",
  path: "/v1/components/configure",
  summary: "One page of a prop's options: runs its async options() in the sandbox on the configured props",
  // Opens the credentials of the accounts the configured app props name (`$auth`).
  access: { resources: "write", compute: "probe", secrets: "open" },
  body: configurePropBody,
  response: configurePropResponse,
  run: (deps, { caller, body }) => configureComponentProp(deps, caller, body),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, { host, secrets, tables });
