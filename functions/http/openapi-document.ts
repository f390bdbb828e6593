import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import * as z from "zod";
import { CHANNEL_NAME_MAX_LENGTH } from "#core/channels";
import { IDEMPOTENCY_HEADER } from "#core/idempotency-keys";
import { SSE_RETRY_MS } from "#core/source-stream";
import { STATUS_OF } from "./error-status.ts";
import { MAX_JSON_BODY_BYTES } from "./limits.ts";
import type { AnyRoute } from "./route.ts";
import { routes } from "./routes.ts";
import { errorSchema, sourceIdParams } from "./schemas.ts";
import { workflowIdParams } from "./workflow-schemas.ts";

const json = (schema: z.ZodType) => ({ "application/json": { schema } });

/** Whether a route without path parameters takes a workspace by `org_id` (query or body), answering 404 for another's. */
function namesWorkspace(route: AnyRoute): boolean {
  const hasOrgId = (schema: unknown) =>
    schema instanceof z.ZodObject && Object.hasOwn((schema as z.ZodObject).shape, "org_id");
  return hasOrgId(route.query) || hasOrgId(route.body);
}

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
  else if (namesWorkspace(route)) {
    errors[STATUS_OF.not_found] = {
      description: "The workspace (org_id or workspace_id) does not exist or is not the caller's",
      content: json(errorSchema),
    };
  }
  if (route.conflict) errors[STATUS_OF.conflict] = { description: route.conflict, content: json(errorSchema) };
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
  if (route.headers?.shape[IDEMPOTENCY_HEADER]) {
    const inProgress = `the first request with this ${IDEMPOTENCY_HEADER} is still in progress`;
    errors[STATUS_OF.conflict] = {
      description: route.conflict ? `${route.conflict}; or ${inProgress}` : `T${inProgress.slice(1)}`,
      content: json(errorSchema),
    };
    errors[STATUS_OF.unprocessable] = {
      description: `This ${IDEMPOTENCY_HEADER} was used with a different request`,
      content: json(errorSchema),
    };
  }
  return errors;
}

/** The live stream's path: outside the manifest (it is no JSON route) and without `/v1`, as the spec has it. */
export const LIVE_STREAM_PATH = "/sources/{id}/sse";
/** A workflow's stream of `$.send.sse` events (docs/design/workflows.md 1.1), registered the same way. */
export const WORKFLOW_STREAM_PATH = "/workflows/{workflow_id}/sse";

const eventIdText = z.string().regex(/^\d{1,15}-\d{1,9}$/, "must be an event id");

interface StreamOperation {
  path: string;
  operationId: string;
  summary: string;
  params: z.ZodObject;
  /** Query parameters besides `last_event_id`. */
  query: Record<string, z.ZodType>;
  /** What a 400 answers, besides a bad `Last-Event-ID` or `last_event_id`. */
  badRequest: string;
  /** How each message names its event. */
  messageName: string;
}

/**
 * A live stream (docs/events.md "Live stream"), served beside the JSON routes: locally by the
 * server itself, on AWS at the stack's `StreamUrl` (the API answers its path with a 307 there).
 */
function registerStream(registry: OpenAPIRegistry, operation: StreamOperation) {
  registry.registerPath({
    method: "get",
    path: operation.path,
    operationId: operation.operationId,
    summary: operation.summary,
    security: [{ bearerAuth: [] }],
    request: {
      params: operation.params,
      query: z.object({
        ...operation.query,
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
        description: `The stream: \`retry: ${SSE_RETRY_MS}\` and a \`:ok\` comment first, then one message per event (\`id:\` the event id, ${operation.messageName}, \`data:\` the event's JSON envelope on one line), and \`:keepalive\` comments while nothing else is sent`,
        content: { "text/event-stream": { schema: z.string() } },
      },
      400: { description: operation.badRequest, content: json(errorSchema) },
      [STATUS_OF.unauthorized]: { description: "No or wrong API key", content: json(errorSchema) },
      [STATUS_OF.not_found]: { description: "Not found, or not the caller's", content: json(errorSchema) },
      [STATUS_OF.method_not_allowed]: { description: "Any method but GET", content: json(errorSchema) },
      [STATUS_OF.unavailable]: { description: "The server is stopping", content: json(errorSchema) },
    },
  });
}

function registerLiveStreams(registry: OpenAPIRegistry) {
  registerStream(registry, {
    path: LIVE_STREAM_PATH,
    operationId: "stream-source-events",
    summary:
      "Follow what a source emits as server-sent events, resuming after Last-Event-ID (on AWS: at the stack's StreamUrl, which this path redirects to with a 307)",
    params: sourceIdParams,
    query: {
      event_name: z
        .string()
        .max(CHANNEL_NAME_MAX_LENGTH)
        .optional()
        .describe(
          "One channel (`default` or empty for the default one, a custom name, `$logs`, `$errors`); without it every channel not starting with `$`",
        ),
    },
    badRequest: "A bad `Last-Event-ID`, `last_event_id` or `event_name`; `details` names it",
    messageName: "`event:` its channel unless the default one",
  });
  registerStream(registry, {
    path: WORKFLOW_STREAM_PATH,
    operationId: "stream-workflow-sse",
    summary:
      "Follow what a workflow's runs send with $.send.sse as server-sent events: the newest 100 first, then live ones, or resuming after Last-Event-ID (on AWS: at the stack's StreamUrl, which this path redirects to with a 307)",
    params: workflowIdParams,
    query: {},
    badRequest: "A bad `Last-Event-ID` or `last_event_id`, or a path id that is not a workflow's; `details` names it",
    messageName: "`event:` the channel given to `$.send.sse`",
  });
}

/** Sources' and workflows' endpoints (`endpoint_url`): outside the manifest, as the streams are. */
export const ENDPOINT_PATH = "/http/{key}";

/**
 * The endpoint of a source's HTTP interface or a workflow's HTTP trigger: any method, any body,
 * no API key (its random key is the secret), answered by the component or with the default.
 */
function registerEndpoint(registry: OpenAPIRegistry) {
  for (const method of ["get", "post", "put", "patch", "delete"] as const) {
    registry.registerPath({
      method,
      path: ENDPOINT_PATH,
      operationId: `endpoint-${method}`,
      summary:
        "Send an event to a source's HTTP interface or a workflow's HTTP trigger (its endpoint_url; any method, any body, extra path segments too); no API key",
      security: [],
      request: { params: z.object({ key: z.string().describe("The endpoint's random key, from its endpoint_url") }) },
      responses: {
        200: {
          description:
            'The run\'s custom response ($.respond) when the endpoint has one; else at once `{"success": true}`, or `{"success": false, ...}` with `x-sluice-source-inactive: 1` for an inactive source',
          content: { "application/json": { schema: z.unknown() } },
        },
        400: {
          description: "A workflow with a custom response whose run never called $.respond",
          content: json(errorSchema),
        },
        404: { description: "No endpoint has this key (an inactive workflow's neither)", content: json(errorSchema) },
        413: { description: "A body over the endpoint's limit", content: json(errorSchema) },
        429: {
          description:
            "The workspace's runs per minute or daily invocations are used up (`Retry-After` says when to retry)",
          content: json(errorSchema),
        },
        508: { description: "The event went round too many webhooks (a delivery loop)", content: json(errorSchema) },
      },
    });
  }
}

/** A paused workflow run's resume and cancel URLs (`$.flow.*`): outside the manifest, as the endpoints are. */
export const FLOW_URL_PATH = "/flow/{run_id}/{secret}/{action}";

/**
 * The URLs `$.flow.suspend`, `$.flow.delay` and `$.flow.rerun` return: any method, no API key (the
 * secret in the path is the proof), docs/workflows.md "Pausing a run".
 */
function registerFlowUrls(registry: OpenAPIRegistry) {
  for (const method of ["get", "post", "put", "patch", "delete"] as const) {
    registry.registerPath({
      method,
      path: FLOW_URL_PATH,
      operationId: `flow-${method}`,
      summary:
        "Resume or cancel a paused workflow run (the resume_url or cancel_url its step got from $.flow.suspend, delay or rerun; any method, the body is given to the run); no API key",
      security: [],
      request: {
        params: z.object({
          run_id: z.string().describe("The run (run_) that paused"),
          secret: z.string().describe("The pause's secret, 24 characters"),
          action: z.enum(["resume", "cancel"]),
        }),
      },
      responses: {
        202: {
          description:
            '`{"status": "resumed" | "cancelled", "run_id": ...}`: the run goes on, or is cancelled (a retry is answered the same)',
          content: { "application/json": { schema: z.object({ status: z.string(), run_id: z.string() }) } },
        },
        404: {
          description: "No paused run at this URL: it went on, was cancelled, or never paused",
          content: json(errorSchema),
        },
        409: {
          description: "The pause was taken the other way already (resumed, cancelled, or its time came)",
          content: json(errorSchema),
        },
        413: { description: "A body over 32 KiB", content: json(errorSchema) },
      },
    });
  }
}

/** The common `include` and `exclude` parameters (`field-filter.ts`): in the query of any JSON route (in a POST's or PUT's body too). */
const fieldFilterQuery = {
  include: z
    .string()
    .optional()
    .describe("Comma-separated field names: each object under `data` keeps only these (wins over exclude)"),
  exclude: z.string().optional().describe("Comma-separated field names: each object under `data` leaves these out"),
};

/** A route's query schema with the field filter's parameters (a JSON route's), as the document lists it. */
function withFieldFilter(route: AnyRoute): z.ZodObject | undefined {
  const query = route.query as z.ZodObject | undefined;
  if (route.answers === "html") return query;
  if (query === undefined) return z.object(fieldFilterQuery);
  return query instanceof z.ZodObject ? query.extend(fieldFilterQuery) : query;
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
        query: withFieldFilter(route),
        headers: route.headers,
        body: route.body ? { content: json(route.body) } : undefined,
      },
      responses: {
        [route.successStatus ?? 200]: {
          description: "Success",
          content: route.answers === "html" ? { "text/html": { schema: route.response } } : json(route.response),
        },
        ...errorResponses(route),
      },
    });
  }
  registerLiveStreams(registry);
  registerEndpoint(registry);
  registerFlowUrls(registry);
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
