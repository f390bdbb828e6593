import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";
import { CHANNEL_NAME_MAX_LENGTH } from "#core/channels";
import { SSE_RETRY_MS } from "#core/source-stream";
import { STATUS_OF } from "./error-status.ts";
import { MAX_JSON_BODY_BYTES } from "./limits.ts";
import type { AnyRoute } from "./route.ts";
import { routes } from "./routes.ts";
import { errorSchema, sourceIdParams } from "./schemas.ts";

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

/** The live stream's path: outside the manifest (it is no JSON route) and without `/v1`, as the spec has it. */
export const LIVE_STREAM_PATH = "/sources/{id}/sse";

const eventIdText = z.string().regex(/^\d{1,15}-\d{1,9}$/, "must be an event id");

/**
 * The live stream (docs/events.md "Live stream"), served beside the JSON routes: locally by the
 * server itself, on AWS at the stack's `StreamUrl` (the API answers this path with a 307 there).
 */
function registerLiveStream(registry: OpenAPIRegistry) {
  registry.registerPath({
    method: "get",
    path: LIVE_STREAM_PATH,
    operationId: "stream-source-events",
    summary:
      "Follow what a source emits as server-sent events, resuming after Last-Event-ID (on AWS: at the stack's StreamUrl, which this path redirects to with a 307)",
    security: [{ bearerAuth: [] }],
    request: {
      params: sourceIdParams,
      query: z.object({
        event_name: z
          .string()
          .max(CHANNEL_NAME_MAX_LENGTH)
          .optional()
          .describe(
            "One channel (`default` or empty for the default one, a custom name, `$logs`, `$errors`); without it every channel not starting with `$`",
          ),
        last_event_id: eventIdText
          .optional()
          .describe(
            "Resume after this event id (for clients that cannot send the Last-Event-ID header); the header wins",
          ),
      }),
      headers: z.object({
        "Last-Event-ID": eventIdText
          .optional()
          .describe("Resume after this event id: the history first, then live events"),
      }),
    },
    responses: {
      200: {
        description: `The stream: \`retry: ${SSE_RETRY_MS}\` and a \`:ok\` comment first, then one message per event (\`id:\` the event id, \`event:\` its channel unless the default one, \`data:\` the event's JSON envelope on one line), and \`:keepalive\` comments while nothing else is sent`,
        content: { "text/event-stream": { schema: z.string() } },
      },
      400: {
        description: "A bad `Last-Event-ID`, `last_event_id` or `event_name`; `details` names it",
        content: json(errorSchema),
      },
      [STATUS_OF.unauthorized]: { description: "No or wrong API key", content: json(errorSchema) },
      [STATUS_OF.not_found]: { description: "Not found, or not the caller's", content: json(errorSchema) },
      [STATUS_OF.method_not_allowed]: { description: "Any method but GET", content: json(errorSchema) },
      [STATUS_OF.unavailable]: { description: "The server is stopping", content: json(errorSchema) },
    },
  });
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
  registerLiveStream(registry);
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
