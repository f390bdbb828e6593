import { reloadComponentProps } from "#core/dynamic-props";
import { reloadPropsBody, reloadPropsResponse } from "./dynamic-props-schemas.ts";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

export const route = defineRoute({
  name: "reload-component-props",
  method: "POST",
  path: "/v1/components/props",
  summary: "The prop set additionalProps() makes on the configured props, merged with the static props",
  access: { resources: "write", compute: "probe" },
  body: reloadPropsBody,
  response: reloadPropsResponse,
  run: (deps, { caller, body }) => reloadComponentProps(deps, caller, body),
});

export const handler = /* @__PURE__ */ lambdaHandler(route, {
  host: () => import("#adapters/aws/parts/host"),
  tables: () => import("#adapters/aws/parts/tables"),
});
