import * as z from "zod";
import { lambdaHandler } from "./lambda.ts";
import { defineRoute } from "./route.ts";

let document: unknown;

export const route = defineRoute({
  name: "get-openapi",
  method: "GET",
  path: "/v1/openapi.json",
  summary: "This API's OpenAPI 3.1 document (no API key needed)",
  auth: false,
  access: {},
  response: z.object({ openapi: z.string() }).loose(),
  run: async () => {
    // Imported on first use: the document module imports the manifest, which imports this file.
    document ??= (await import("./openapi-document.ts")).buildOpenApiDocument();
    return document;
  },
});

export const handler = /* @__PURE__ */ lambdaHandler(route);
