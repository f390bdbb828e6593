import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import type { z } from "zod";
import { STATUS_OF } from "./error-status.ts";
import { MAX_JSON_BODY_BYTES } from "./limits.ts";
import type { AnyRoute } from "./route.ts";
import { routes } from "./routes.ts";
import { errorSchema } from "./schemas.ts";

const json = (schema: z.ZodType) => ({ "application/json": { schema } });

function errorResponses(route: AnyRoute) {
  const errors: Record<number, { description: string; content: ReturnType<typeof json> }> = {
    [STATUS_OF.validation]: {
      description: "A parameter or the body is invalid; `details` names each field",
      content: json(errorSchema),
    },
    [STATUS_OF.internal]: {
      description: "Unexpected failure; the body carries a request id",
      content: json(errorSchema),
    },
  };
  if (route.auth !== false) {
    errors[STATUS_OF.unauthorized] = { description: "No or wrong API key", content: json(errorSchema) };
    errors[STATUS_OF.unavailable] = {
      description: "The server cannot store data now (its disk is full or read-only); try again later",
      content: json(errorSchema),
    };
  }
  if (route.params)
    errors[STATUS_OF.not_found] = { description: "Not found, or not the caller's", content: json(errorSchema) };
  if (route.method === "POST" || route.method === "PUT") {
    errors[STATUS_OF.payload_too_large] = {
      description: `Body over ${MAX_JSON_BODY_BYTES / (1024 * 1024)} MiB`,
      content: json(errorSchema),
    };
    errors[STATUS_OF.unsupported_media_type] = {
      description: "Body without Content-Type: application/json",
      content: json(errorSchema),
    };
  }
  return errors;
}

/** The OpenAPI 3.1 document of every route in the manifest, generated from the routes' zod schemas. */
export function buildOpenApiDocument(serverUrl = "/") {
  const registry = new OpenAPIRegistry();
  registry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer <key>`",
  });
  for (const route of routes) {
    registry.registerPath({
      method: route.method.toLowerCase() as "get" | "post" | "put" | "delete",
      path: route.path,
      operationId: route.name,
      summary: route.summary,
      security: route.auth === false ? [] : [{ bearerAuth: [] }],
      request: {
        params: route.params as z.ZodObject | undefined,
        query: route.query as z.ZodObject | undefined,
        body: route.body ? { content: json(route.body) } : undefined,
      },
      responses: {
        [route.successStatus ?? 200]: { description: "Success", content: json(route.response) },
        ...errorResponses(route),
      },
    });
  }
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: "3.1.0",
    info: {
      title: "Sluice REST API",
      version: "1",
      description: "Self-hosted event automation: sources, subscriptions, webhooks.",
    },
    servers: [{ url: serverUrl }],
  });
}
