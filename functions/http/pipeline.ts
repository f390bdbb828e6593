import middy, { type MiddlewareObj } from "@middy/core";
import type { APIGatewayProxyEventV2, Context } from "aws-lambda";
import type { z } from "zod";
import { authenticate } from "#core/accounts";
import { DomainError, type FieldIssue } from "#core/errors";
import type { Caller } from "#core/identity";
import { MAX_JSON_DEPTH, nestsTooDeep } from "#core/json-depth";
import type { Deps } from "#core/ports/deps";
import { createLogger, type Logger } from "#core/ports/logger";
import { answerDeadline } from "./answer-deadline.ts";
import { applyFieldFilter, readFieldFilter } from "./field-filter.ts";
import { MAX_JSON_BODY_BYTES } from "./limits.ts";
import { logRequest } from "./request-log.ts";
import { errorResult, type HttpResult, htmlResult, jsonResult } from "./responses.ts";
import type { AnyRoute, HtmlPage } from "./route.ts";

export type HttpEvent = APIGatewayProxyEventV2;

/** Builds the dependencies once per container (or once per local server) on first use. */
export type DepsProvider = () => Promise<Deps>;

interface RequestState {
  requestId: string;
  /** `performance.now()` when the request arrived. */
  startedMs: number;
  deps?: Deps;
  log?: Logger;
  caller?: Caller;
  input?: { params: unknown; query: unknown; body: unknown };
  filter?: ReturnType<typeof readFieldFilter>;
}

type HttpContext = Context & { sluice: RequestState };
type Request = middy.Request<HttpEvent, HttpResult, Error, HttpContext>;

function issuesOf(error: z.ZodError, location: string): FieldIssue[] {
  return error.issues.map((issue) => ({
    field: issue.path.length > 0 ? issue.path.map(String).join(".") : location,
    message: issue.message,
  }));
}

function validate<T>(schema: z.ZodType<T> | undefined, value: unknown, location: string): T {
  if (schema === undefined) return undefined as T;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = issuesOf(parsed.error, location);
  const summary = issues.map((i) => `${i.field}: ${i.message}`).join("; ");
  throw new DomainError("validation", summary, issues);
}

function header(event: HttpEvent, name: string): string | undefined {
  return event.headers?.[name] ?? undefined;
}

/**
 * Reads and parses the JSON body: 413 past the limit, 415 without a JSON content type, 400 when
 * malformed or nested deeper than {@link MAX_JSON_DEPTH}.
 */
export function readJsonBody(event: HttpEvent): unknown {
  const raw = event.body ?? "";
  const text = event.isBase64Encoded ? Buffer.from(raw, "base64").toString("utf8") : raw;
  if (Buffer.byteLength(text, "utf8") > MAX_JSON_BODY_BYTES) {
    throw new DomainError("payload_too_large", `request body is larger than ${MAX_JSON_BODY_BYTES} bytes`);
  }
  if (text.trim() === "") return undefined;
  const contentType = header(event, "content-type") ?? "";
  if (!/^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
    throw new DomainError("unsupported_media_type", "a request body must be sent with Content-Type: application/json");
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    // V8 quotes the text around the error (`Unexpected token 's', ..."api_key":sk-1"...`): the body
    // may be credentials, so a message that quotes is not repeated.
    const message = (error as Error).message;
    const detail = message.includes('"') ? "" : `: ${message}`;
    throw new DomainError("validation", `request body is not valid JSON${detail}`, [
      { field: "body", message: "is not valid JSON" },
    ]);
  }
  if (nestsTooDeep(text)) {
    throw new DomainError("validation", `request body: nests arrays and objects deeper than ${MAX_JSON_DEPTH}`, [
      { field: "body", message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH}` },
    ]);
  }
  return body;
}

function stateOf(request: Request): RequestState {
  return request.context.sluice;
}

/** The request line (`#http/request-log`) of an answered request, once its logger is known. */
function logAnswered(request: Request, state: RequestState): void {
  if (!state.deps || !request.response) return;
  logRequest(state.deps.log, {
    method: request.event.requestContext?.http?.method ?? "-",
    path: request.event.rawPath ?? "-",
    status: request.response.statusCode,
    durationMs: performance.now() - state.startedMs,
    requestId: state.requestId,
  });
}

function requestContext(logRequests: boolean): MiddlewareObj<HttpEvent, HttpResult, Error, HttpContext> {
  return {
    before: (request) => {
      const requestId = request.event.requestContext?.requestId ?? request.context.awsRequestId ?? "unknown";
      request.context.sluice = { requestId, startedMs: performance.now() };
    },
    after: (request) => {
      if (request.response) request.response.headers["x-request-id"] = stateOf(request).requestId;
      if (logRequests) logAnswered(request, stateOf(request));
    },
    onError: (request) => {
      const state = request.context.sluice ?? { requestId: "unknown", startedMs: performance.now() };
      // Before the dependencies (and their logger) are there, their failure still reaches the log.
      const log = state.log ?? withoutDepsLog().child({ request_id: state.requestId });
      request.response = errorResult(request.error, state.requestId, log);
      if (logRequests) logAnswered(request, state);
    },
  };
}

/**
 * The log of a request whose dependencies could not be made (invalid settings, a part that failed
 * to load): errors only, as JSON lines on stderr, where a function's own logger writes too.
 */
function withoutDepsLog(): Logger {
  return createLogger({
    level: "error",
    format: "json",
    write: (line) => process.stderr.write(`${line}\n`),
    now: Date.now,
  });
}

function dependencies(provide: DepsProvider): MiddlewareObj<HttpEvent, HttpResult, Error, HttpContext> {
  return {
    before: async (request) => {
      const state = stateOf(request);
      state.deps = await provide();
      state.log = state.deps.log.child({ request_id: state.requestId });
    },
  };
}

function authentication(route: AnyRoute): MiddlewareObj<HttpEvent, HttpResult, Error, HttpContext> {
  return {
    before: async (request) => {
      if (route.auth === false) return;
      const state = stateOf(request);
      state.caller = await authenticate(state.deps as Deps, header(request.event, "authorization"));
    },
  };
}

function input(route: AnyRoute): MiddlewareObj<HttpEvent, HttpResult, Error, HttpContext> {
  return {
    before: async (request) => {
      const state = stateOf(request);
      const body = readJsonBody(request.event);
      const query = { ...(request.event.queryStringParameters ?? {}) };
      state.filter = readFieldFilter(query, body);
      const params = validate(route.params, request.event.pathParameters ?? {}, "path");
      await route.guard?.(state.deps as Deps, { caller: state.caller as Caller, params });
      state.input = {
        params,
        query: validate(route.query, query, "query"),
        // No body is an empty one; a JSON `null` is a body, checked as any other (an object is expected).
        body: validate(route.body, body === undefined ? {} : body, "body"),
      };
    },
  };
}

export interface HttpHandlerOptions {
  /**
   * Log a request line per request. On AWS the handler is the function's entry, so it logs its
   * own; local mode's server logs every request it serves (endpoints and streams too) itself.
   * @default false
   */
  readonly logRequests?: boolean;
}

/**
 * The one middleware stack of every endpoint: request id and error mapping outermost, then
 * dependencies, authentication, input parsing and validation, and last the route's use case.
 */
export function createHttpHandler(route: AnyRoute, provide: DepsProvider, options: HttpHandlerOptions = {}) {
  const run = async (event: HttpEvent, context: HttpContext): Promise<HttpResult> => {
    const state = context.sluice;
    const deps = state.deps as Deps;
    const remainingMs =
      typeof context.getRemainingTimeInMillis === "function" ? context.getRemainingTimeInMillis() : undefined;
    const answerByMs = answerDeadline(deps.clock.nowMs(), remainingMs, event.requestContext?.timeEpoch);
    const body = await route.run(deps, {
      caller: state.caller as Caller,
      params: state.input?.params,
      query: state.input?.query,
      body: state.input?.body,
      requestId: state.requestId,
      idempotencyKey: header(event, "idempotency-key"),
      answerByMs,
    });
    if (route.answers === "html") {
      const page = body as HtmlPage;
      return htmlResult(page.status, page.title, page.message);
    }
    return jsonResult(route.successStatus ?? 200, applyFieldFilter(body, state.filter));
  };
  return middy<HttpEvent, HttpResult, Error, HttpContext>()
    .use(requestContext(options.logRequests ?? false))
    .use(dependencies(provide))
    .use(authentication(route))
    .use(input(route))
    .handler(run);
}
