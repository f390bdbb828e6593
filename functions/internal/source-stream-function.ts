/**
 * The live streams on AWS, `GET <stream URL>/sources/{id}/sse` and `GET <stream URL>/workflows/{id}/sse`
 * (a workflow's `$.send.sse` events, `functions/core/workflow-stream.ts`): a Lambda function behind a function
 * URL with response streaming (`InvokeMode: RESPONSE_STREAM`, auth `NONE`: the function checks the
 * Bearer key itself). API Gateway HTTP APIs cannot stream, so the HTTP API's `GET /sources/{id}/sse`
 * and `GET /workflows/{workflow_id}/sse` only redirect here (`sse-redirect.ts`).
 *
 * What is sent is decided by `functions/core/source-stream.ts`, as in local mode. The I/O differs:
 * a Lambda function has no bus to listen to, so it POLLS the store for events newer than the last
 * id it sent (every `SLUICE_STREAM_POLL_MS`). A client that resumes (`Last-Event-ID`) first gets
 * the events after that id from the history, through the same loop. Ids increase and events
 * become visible in id order, so "newer than the last id sent" misses nothing and repeats nothing.
 *
 * A Lambda invocation lasts at most 15 minutes. The response ends cleanly `SLUICE_STREAM_END_MARGIN_MS`
 * before the function's timeout (and after {@link MAX_RESPONSE_BYTES}); the client reconnects with
 * `Last-Event-ID` (an `EventSource` does it by itself, after the opening frame's `retry:`) and
 * resumes exactly where it was. Lambda does not tell a function that its client went away, so a
 * disconnected stream polls until its window ends.
 *
 * A slow client cannot grow memory: when the response stream reports backpressure, nothing more is
 * read from the store until it drains (or the window ends). Each client has its own invocation, so
 * it slows nobody else.
 */
import type { Writable } from "node:stream";
import { finished } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import * as z from "zod";
import { loadAwsComputeConfig, type StreamSettings } from "#config/aws-compute-env";
import { authenticate } from "#core/accounts";
import { DomainError } from "#core/errors";
import type { Deps } from "#core/ports/deps";
import type { EventQuery } from "#core/ports/event-store";
import {
  eventsAfter,
  openSourceStream,
  type SourceStream,
  SSE_HEADERS,
  SSE_KEEPALIVE_FRAME,
  SSE_KEEPALIVE_MS,
  SSE_OPENING_FRAME,
  type StreamTarget,
  sseFrame,
  streamTargetExists,
} from "#core/source-stream";
import { openWorkflowStream } from "#core/workflow-stream";
import { logRequest, type RequestLine } from "#http/request-log";
import { sourceIdParams } from "#http/schemas";
import { streamRefusal } from "#http/stream-refusal";
import { workflowIdParams } from "#http/workflow-schemas";
import { awsDepsLoader } from "./internal-handler.ts";

/**
 * A response ends once it has carried this much (the client reconnects at once and resumes):
 * well below Lambda's limit on a streamed response, and it restarts the uncapped first 6 MB.
 */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** What the stream reads: the caller's key, the source or workflow, its events. */
export type StreamDeps = Pick<Deps, "identity" | "sources" | "workflows" | "events" | "log">;

/** The parts of the function URL event (payload format 2.0) the stream reads. */
export const functionUrlEventSchema = z.object({
  rawPath: z.string().default("/"),
  rawQueryString: z.string().default(""),
  headers: z.record(z.string(), z.string()).default({}),
  requestContext: z
    .object({
      requestId: z.string().optional(),
      http: z.object({ method: z.string().default("GET") }).default({ method: "GET" }),
    })
    .default({ http: { method: "GET" } }),
});

/** The invocation context the handler uses (Lambda's `Context` has these). */
export interface StreamContext {
  getRemainingTimeInMillis(): number;
  awsRequestId?: string;
}

export interface ResponseMetadata {
  statusCode: number;
  headers: Record<string, string>;
}

/**
 * Sets the status and headers of a streamed response and returns the stream to write the body to:
 * `awslambda.HttpResponseStream.from` in the Lambda runtime.
 */
export type ResponseStreamFactory = (stream: Writable, metadata: ResponseMetadata) => Writable;

export interface SourceStreamHandlerOptions {
  /** Builds (once) what the stream reads. */
  loadDeps: () => Promise<StreamDeps>;
  /** Poll interval and end margin. @default from the environment (`loadAwsComputeConfig`) */
  settings?: () => Pick<StreamSettings, "pollIntervalMs" | "endMarginMs">;
  /** A comment line is sent when nothing was sent for this long. @default SSE_KEEPALIVE_MS */
  keepaliveMs?: number;
  /** @default MAX_RESPONSE_BYTES */
  maxResponseBytes?: number;
  /** @default awslambda.HttpResponseStream.from when the Lambda runtime provides it, else the stream as is */
  responseStream?: ResponseStreamFactory;
}

type LambdaGlobal = {
  streamifyResponse?: <H>(handler: H) => H;
  HttpResponseStream?: { from(stream: Writable, metadata: ResponseMetadata): Writable };
};

const lambdaGlobal = (): LambdaGlobal | undefined => (globalThis as unknown as { awslambda?: LambdaGlobal }).awslambda;

/** `awslambda.HttpResponseStream.from` when running in Lambda; elsewhere the body goes to the stream itself. */
export const lambdaResponseStream: ResponseStreamFactory = (stream, metadata) => {
  const responses = lambdaGlobal()?.HttpResponseStream;
  return responses ? responses.from(stream, metadata) : stream;
};

const PATH = /^\/+(sources|workflows)\/+([^/]+)\/+sse\/*$/;

/** What a stream path follows, or undefined for any other path. */
export function streamPathTarget(rawPath: string): StreamTarget | undefined {
  const match = PATH.exec(rawPath);
  if (!match) return undefined;
  const kind = match[1] === "workflows" ? "workflow" : "source";
  const raw = match[2] as string;
  try {
    return { kind, id: decodeURIComponent(raw) };
  } catch {
    return { kind, id: raw };
  }
}

/** The source id of a source's stream path, or undefined for any other path. */
export function streamPathSourceId(rawPath: string): string | undefined {
  const target = streamPathTarget(rawPath);
  return target?.kind === "source" ? target.id : undefined;
}

/** What a request for a stream follows; anything else is a 404 or 405, answered without reading the store. */
function routeOf(event: z.infer<typeof functionUrlEventSchema>): StreamTarget {
  const method = event.requestContext.http.method.toUpperCase();
  const target = streamPathTarget(event.rawPath);
  if (target === undefined) {
    throw new DomainError(
      "not_found",
      `no route for ${method} ${event.rawPath}: streams are at /sources/{id}/sse and /workflows/{id}/sse`,
    );
  }
  if (method !== "GET") throw new DomainError("method_not_allowed", `${method} is not allowed on ${event.rawPath}`);
  return target;
}

/** Checks the caller and the request and opens the stream: every error here is answered as JSON, before any byte is streamed. */
async function open(
  deps: StreamDeps,
  event: z.infer<typeof functionUrlEventSchema>,
  target: StreamTarget,
): Promise<SourceStream> {
  const caller = await authenticate(deps, event.headers.authorization);
  const [field, params] =
    target.kind === "workflow"
      ? ["workflow_id", workflowIdParams.safeParse({ workflow_id: target.id })]
      : ["id", sourceIdParams.safeParse({ id: target.id })];
  if (!params.success) {
    const message = params.error.issues[0]?.message ?? `is not a ${target.kind} id`;
    throw new DomainError("validation", `${field}: ${message}`, [{ field, message }]);
  }
  const query = new URLSearchParams(event.rawQueryString);
  const resume = {
    lastEventId: event.headers["last-event-id"],
    last_event_id: query.get("last_event_id") ?? undefined,
  };
  if (target.kind === "workflow") return openWorkflowStream(deps, caller, target.id, resume);
  return openSourceStream(deps, caller, target.id, { ...resume, event_name: query.get("event_name") ?? undefined });
}

/** The id the stream starts after when the client does not resume: the newest event it carries now. */
async function newestId(deps: StreamDeps, stream: SourceStream): Promise<string> {
  const query: EventQuery = { limit: 1, count: false };
  if (stream.channel !== undefined) query.channel = stream.channel;
  const page = await deps.events.listEvents(stream.sourceId, query);
  return page.items[0]?.id ?? "0-0";
}

/** Writes with backpressure: waits for `drain` unless `stop` fires first. */
class FrameWriter {
  bytes = 0;
  lastWriteAt = Date.now();

  constructor(
    private readonly out: Writable,
    private readonly stop: AbortSignal,
  ) {}

  /** False when nothing was written: the response is ending. */
  async write(text: string): Promise<boolean> {
    if (this.stop.aborted || this.out.destroyed || this.out.writableEnded) return false;
    this.bytes += Buffer.byteLength(text, "utf8");
    this.lastWriteAt = Date.now();
    if (this.out.write(text)) return true;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.out.off("drain", done);
        this.out.off("close", done);
        this.stop.removeEventListener("abort", done);
        resolve();
      };
      this.out.once("drain", done);
      this.out.once("close", done);
      this.stop.addEventListener("abort", done, { once: true });
    });
    return true;
  }
}

/** Ends the response and waits (briefly) until it is flushed. */
async function endResponse(out: Writable, body?: string): Promise<void> {
  // A client that went away may make the end fail; that must not be an unhandled 'error'.
  out.on("error", () => undefined);
  if (!out.destroyed && !out.writableEnded) out.end(body);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    finished(out).catch(() => undefined),
    new Promise((resolve) => {
      timer = setTimeout(resolve, 2_000);
    }),
  ]);
  clearTimeout(timer);
}

/**
 * The handler Lambda wraps with `awslambda.streamifyResponse`: `(event, responseStream, context)`.
 * Tests call it directly with a Node `Writable` and a context whose remaining time they choose.
 */
export function createSourceStreamHandler(options: SourceStreamHandlerOptions) {
  const settingsOf = options.settings ?? (() => loadAwsComputeConfig().stream);
  const keepaliveMs = options.keepaliveMs ?? SSE_KEEPALIVE_MS;
  const maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
  const respond = options.responseStream ?? lambdaResponseStream;

  return async (rawEvent: unknown, responseStream: Writable, context: StreamContext): Promise<void> => {
    const startedMs = performance.now();
    let requestId = context.awsRequestId ?? "unknown";
    let deps: StreamDeps | undefined;
    // The request line (#http/request-log), written when the response ends; the query is never in it.
    const line: RequestLine = { method: "-", path: "-", status: undefined, durationMs: 0, requestId };
    const logLine = () => {
      line.durationMs = performance.now() - startedMs;
      line.requestId = requestId;
      if (deps) logRequest(deps.log, line);
    };
    let stream: SourceStream;
    let cursor: string;
    let settings: Pick<StreamSettings, "pollIntervalMs" | "endMarginMs">;
    try {
      const event = functionUrlEventSchema.parse(rawEvent);
      requestId = event.requestContext.requestId ?? requestId;
      line.method = event.requestContext.http.method.toUpperCase();
      line.path = event.rawPath;
      const target = routeOf(event);
      deps = await options.loadDeps();
      settings = settingsOf();
      stream = await open(deps, event, target);
      cursor = stream.resumeAfter ?? (await newestId(deps, stream));
    } catch (error) {
      const result = streamRefusal(error, requestId, deps?.log.child({ request_id: requestId }));
      await endResponse(
        respond(responseStream, { statusCode: result.statusCode, headers: result.headers }),
        result.body,
      );
      line.status = result.statusCode;
      logLine();
      return;
    }
    const log = deps.log.child({ request_id: requestId, source_id: stream.sourceId });

    // Everything that ends the response: the window closing, the client going away, the byte cap.
    const stop = new AbortController();
    const windowMs = Math.max(0, context.getRemainingTimeInMillis() - settings.endMarginMs);
    const deadline = setTimeout(() => stop.abort("window"), windowMs);
    const out = respond(responseStream, {
      statusCode: 200,
      headers: { ...SSE_HEADERS, "x-request-id": requestId },
    });
    const gone = () => stop.abort("client");
    out.once("close", gone);
    out.on("error", gone);
    const writer = new FrameWriter(out, stop.signal);
    const stopping = () => stop.signal.aborted || context.getRemainingTimeInMillis() <= settings.endMarginMs;

    let sent = 0;
    let failed = false;
    // When the stream last looked whether its source or workflow still exists.
    let lookedAt = Date.now();
    try {
      await writer.write(SSE_OPENING_FRAME);
      while (!stopping()) {
        // The store reads only the stream's channels, and only ids after the cursor.
        for await (const stored of eventsAfter(deps, stream, cursor)) {
          if (stopping()) break;
          if (!(await writer.write(sseFrame(stored, stream)))) break;
          sent++;
          cursor = stored.id;
          if (writer.bytes >= maxBytes) stop.abort("size");
        }
        if (stopping()) break;
        if (Date.now() - lookedAt >= keepaliveMs) {
          lookedAt = Date.now();
          if (!(await streamTargetExists(deps, stream))) {
            stop.abort("deleted");
            break;
          }
        }
        if (Date.now() - writer.lastWriteAt >= keepaliveMs) await writer.write(SSE_KEEPALIVE_FRAME);
        const untilKeepalive = Math.max(1, keepaliveMs - (Date.now() - writer.lastWriteAt));
        await sleep(Math.min(settings.pollIntervalMs, untilKeepalive), undefined, { signal: stop.signal }).catch(
          () => undefined,
        );
      }
    } catch (error) {
      // The store failed: end the response; the client reconnects with the last id it received.
      failed = true;
      log.error("stream failed", { error: (error as Error).message, stack: (error as Error).stack });
    } finally {
      clearTimeout(deadline);
      out.off("close", gone);
      const reason = failed ? "error" : String(stop.signal.reason ?? "window");
      log.info("stream ended", { reason, events_sent: sent, last_event_id: cursor });
      await endResponse(out);
      line.status = 200;
      if (reason === "client") line.aborted = true;
      logLine();
    }
  };
}

/**
 * The AWS composition root, imported on the first invocation (tests import this module without
 * the AWS SDK). The stream reads the resources table only.
 */
const loadAwsStreamDeps: () => Promise<StreamDeps> = awsDepsLoader({
  tables: () => import("#adapters/aws/parts/tables"),
});

export const streamHandler = createSourceStreamHandler({ loadDeps: loadAwsStreamDeps });

/** The Lambda entry: `awslambda.streamifyResponse` exists only in Lambda's Node.js runtime. */
export const handler = lambdaGlobal()?.streamifyResponse?.(streamHandler) ?? streamHandler;
