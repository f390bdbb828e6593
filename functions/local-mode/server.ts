import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Context } from "aws-lambda";
import { type DiskFileStore, FILE_URL_PATH } from "#adapters/local/disk-file-store";
import { DomainError } from "#core/errors";
import {
  type IncomingHttpRequest,
  MAX_HTTP_INTERFACE_BODY_BYTES,
  PAYLOAD_TOO_LARGE_RESPONSE,
} from "#core/http-run-event";
import type { Deps } from "#core/ports/deps";
import { receiveHttpRequest } from "#core/source-endpoint";
import { FLOW_PATH, receiveFlowRequest } from "#core/workflow-pauses";
import { MAX_JSON_BODY_BYTES } from "#http/limits";
import { createHttpHandler } from "#http/pipeline";
import { ENDPOINT_LOG_PATH, FILE_LOG_PATH, FLOW_LOG_PATH, logRequest, type RequestLine } from "#http/request-log";
import { errorResult, type HttpResult, jsonResult } from "#http/responses";
import type { AnyRoute } from "#http/route";
import { unroutedResult } from "#http/route-not-found";
import { createRouter } from "#http/routing";
import { answerHeaders } from "#runtime/http-response";
import type { HttpResponseSpec } from "#runtime/protocol";
import { toApiGatewayEvent } from "./api-gateway-event.ts";
import { serverMaxConnections, serverOpenFilesLimit } from "./connection-cap.ts";
import { discardRest } from "./discard-body.ts";
import { handleFileRequest } from "./file-store-server.ts";
import { FileTransferSlots, maxFileTransfersFor } from "./file-transfer-slots.ts";
import {
  SourceStreamServer,
  type SourceStreamServerOptions,
  STREAM_PATH,
  WORKFLOW_STREAM_PATH,
} from "./source-stream-server.ts";

class BodyTooLargeError extends Error {}

/** Reads a request body, giving up (and discarding the rest, bounded) past `limit` bytes. */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const overflow = () => {
      request.removeAllListeners("data");
      discardRest(request);
      reject(new BodyTooLargeError());
    };
    if (Number(request.headers["content-length"] ?? 0) > limit) return overflow();
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return overflow();
      chunks.push(chunk);
    });
    request.on("end", () => resolve(Buffer.concat(chunks)));
    request.on("error", reject);
  });
}

/** Status and message for each error code of Node's HTTP parser that is not a plain 400. */
const PARSER_REFUSALS: ReadonlyMap<string, readonly [number, string]> = new Map([
  ["HPE_HEADER_OVERFLOW", [431, "the request line and headers are too large"]],
  ["HPE_CHUNK_EXTENSIONS_OVERFLOW", [413, "chunk extensions are too large"]],
  ["ERR_HTTP_REQUEST_TIMEOUT", [408, "the request took too long to arrive"]],
]);

/**
 * The answer to a request Node's HTTP parser refused before any handler saw it: headers over
 * Node's limit (431, as Node answers), a chunk extension too large (413), a request that took too
 * long to arrive (408), anything else that is not valid HTTP, such as raw non-ASCII bytes in the
 * path (400). Node would send these with no body; this gives them the API's error shape.
 */
export function malformedRequestResult(error: Error & { code?: string }, requestId: string): HttpResult {
  const code = error.code ?? "unparsable";
  const [status, message] = PARSER_REFUSALS.get(code) ?? [400, `the request is not valid HTTP (${code})`];
  return jsonResult(status, { error: message }, { "x-request-id": requestId });
}

/** The whole HTTP/1.1 response, for a socket no ServerResponse belongs to; a HEAD answer has no body. */
function rawResponse(result: HttpResult, head = false): string {
  const length = Buffer.byteLength(result.body, "utf8");
  const headers = { ...result.headers, "content-length": String(length), connection: "close" };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  const status = `HTTP/1.1 ${result.statusCode} ${STATUS_CODES[result.statusCode] ?? ""}`;
  return `${status}\r\n${lines.join("\r\n")}\r\n\r\n${head ? "" : result.body}`;
}

/**
 * Whether a request Node's parser refused is a HEAD (whose answer must have no body): the method
 * of the last request line starting in the refused chunk before the point of failure. The chunk
 * can begin with the end of an earlier request (a body the server answered before reading it all,
 * or a pipelined request), so its first bytes alone can misjudge it. When no request line starts
 * there (the refused one began in an earlier read), a HEAD cannot be told and the answer has a body.
 */
export function refusedRequestIsHead(rawPacket: Buffer | undefined, bytesParsed: number | undefined): boolean {
  if (!rawPacket) return false;
  const upToFailure = rawPacket.subarray(0, (bytesParsed ?? rawPacket.length) + 1).toString("latin1");
  // A request line starts with a method and a target; the one before may end without a newline.
  const requestLines = [...upToFailure.matchAll(/(?<![A-Z])(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) [/*h]/g)];
  return requestLines.at(-1)?.[1] === "HEAD";
}

/** Sockets that got the answer to a refused request and are being drained. */
const answeredSockets = new WeakSet<Socket>();

/**
 * Answers a refused request on its socket, unless an answer already started on it. What the
 * client still sends is discarded (bounded), so that the close does not reset the connection
 * before the client reads the answer.
 */
function answerClientError(
  error: Error & { code?: string; rawPacket?: Buffer; bytesParsed?: number },
  socket: Socket,
): void {
  // Node's parser stays on the socket and reports its error again for every later chunk: a socket
  // answered already is draining, and destroying it now would reset the client's upload before
  // it reads the answer.
  if (answeredSockets.has(socket)) return;
  // The same check as Node's own default (`socketOnError`): never write into an answer already started.
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  answeredSockets.add(socket);
  discardRest(socket);
  socket.on("error", () => socket.destroy());
  socket.setTimeout(5_000, () => socket.destroy());
  const head = refusedRequestIsHead(error.rawPacket, error.bytesParsed);
  socket.end(rawResponse(malformedRequestResult(error, randomUUID()), head));
  socket.resume();
}

function send(response: ServerResponse, result: HttpResult): void {
  response.writeHead(result.statusCode, result.headers);
  response.end(result.body);
}

/**
 * Writes a source's answer. Its headers are filtered again right here (`answerHeaders`: no
 * framing or hop-by-hop header, nothing Node would refuse; each cookie a `Set-Cookie` header of
 * its own), whatever produced the spec, and the server sets the framing itself: a
 * `Content-Length`, or for 204 and 304 no body at all.
 */
function sendSpec(response: ServerResponse, spec: HttpResponseSpec): void {
  const { status, headers, body } = preparedAnswer(spec);
  response.writeHead(status, headers);
  response.end(body);
}

/** An answer as `sendSpec` writes it: filtered headers with the framing, the body's bytes (none for 204 and 304). */
interface PreparedAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer | undefined;
}

/** The fixed answers (frozen specs: `{"success":true}` and the like), prepared once each. */
const preparedFixedAnswers = new WeakMap<HttpResponseSpec, PreparedAnswer>();

function preparedAnswer(spec: HttpResponseSpec): PreparedAnswer {
  const known = preparedFixedAnswers.get(spec);
  if (known) return known;
  const filtered = answerHeaders(spec.headers, spec.cookies);
  const headers: PreparedAnswer["headers"] = filtered.headers;
  if (filtered.cookies.length > 0) headers["set-cookie"] = filtered.cookies;
  let prepared: PreparedAnswer;
  if (spec.status === 204 || spec.status === 304) prepared = { status: spec.status, headers, body: undefined };
  else {
    const body = Buffer.from(spec.body, spec.bodyEncoding === "base64" ? "base64" : "utf8");
    prepared = { status: spec.status, headers: { ...headers, "content-length": String(body.length) }, body };
  }
  // Only a spec that cannot change (and whose headers cannot) may be answered from memory.
  if (Object.isFrozen(spec) && (spec.headers === undefined || Object.isFrozen(spec.headers))) {
    preparedFixedAnswers.set(spec, prepared);
  }
  return prepared;
}

/**
 * Paths logged as `FLOW_LOG_PATH`: a pause's URLs, and anything a mistyped or prefixed one could
 * be (a `flow` segment anywhere, as decoded: `/api/flow/...`, `//flow/...`, `/%66low/...`).
 */
const FLOW_LOG_MASK = /(^|\/)flow(\/|;|$)/i;
/** The same for a File Store file's URL (its token is the authority to read or write the file). */
const FILE_LOG_MASK = /(^|\/)files(\/|;|$)/i;

/** `/http/<key>` and `/http/<key>/<path>`: a source's HTTP interface endpoint. */
const ENDPOINT_PATH = /^\/http\/([A-Za-z0-9_-]{1,64})(\/.*)?$/;

async function handleEndpoint(
  deps: Deps,
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
  endpointKey: string,
  path: string,
  line: RequestLine,
): Promise<void> {
  const incoming = await incomingRequest(deps, request, response, url, path);
  if (incoming) sendSpec(response, await receiveHttpRequest(deps, endpointKey, incoming, line));
}

/**
 * A request to an endpoint or a pause's URL as core takes it, its body read; undefined when the
 * body was over the endpoints' limit (answered 413 already).
 */
async function incomingRequest(
  deps: Deps,
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
  path: string,
): Promise<IncomingHttpRequest | undefined> {
  let body: Buffer;
  try {
    body = await readBody(request, MAX_HTTP_INTERFACE_BODY_BYTES);
  } catch (error) {
    if (!(error instanceof BodyTooLargeError)) throw error;
    sendSpec(response, PAYLOAD_TOO_LARGE_RESPONSE);
    return undefined;
  }
  return {
    method: request.method ?? "GET",
    path,
    rawQuery: url.search.slice(1),
    headers: request.headers,
    body,
    clientIp: request.socket.remoteAddress ?? "",
    url: `${deps.runtime.publicUrl}${url.pathname}${url.search}`,
  };
}

/** `/flow/<run id>/<secret>/{resume,cancel}`: a paused workflow run's URL (`#core/workflow-pauses`). */
async function handleFlow(
  deps: Deps,
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
  runId: string,
  token: string,
  action: "resume" | "cancel",
): Promise<void> {
  const incoming = await incomingRequest(deps, request, response, url, "/");
  if (incoming) sendSpec(response, await receiveFlowRequest(deps, runId, token, action, incoming));
}

/** A minimal Lambda context: enough for middy, with no deadline (local requests do not time out early). */
function lambdaContext(requestId: string, route: AnyRoute): Context {
  return {
    awsRequestId: requestId,
    functionName: `local-${route.name}`,
    callbackWaitsForEmptyEventLoop: false,
  } as Context;
}

/**
 * The URL of a request from its target. An origin-form target is read as a path even when it
 * starts with `//` (which `new URL(target, base)` would take for a host); an absolute-form target
 * (`http://host/path`) keeps its path. Undefined for a target that is neither, such as `*`.
 */
export function requestUrl(target: string): URL | undefined {
  try {
    return target.startsWith("/") ? new URL(`http://localhost${target}`) : new URL(target);
  } catch {
    return undefined;
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export interface LocalServerOptions {
  /** The bus live streams follow (`localDeps().bus`). */
  bus: SourceStreamServerOptions["bus"];
  /** Live stream tuning (tests shorten the keepalive). */
  stream?: Pick<SourceStreamServerOptions, "keepaliveMs" | "maxUnsentBytes">;
  /** The File Store whose URLs it serves at `/files/...` (`localDeps().files`); none: they are 404s. */
  files?: DiskFileStore;
  /** The slots of file transfers served at once (file-transfer-slots.ts); by default, an eighth of the open-files limit. */
  fileTransfers?: FileTransferSlots;
}

export interface LocalServer {
  /** Not listening yet. */
  server: Server;
  /** The live streams it serves; `streams.close()` ends them before the server closes. */
  streams: SourceStreamServer;
}

/**
 * The local REST API: one Node HTTP server that routes each request with the manifest, turns it
 * into the API Gateway event the deployed Lambda would receive, and calls the same handler. Live
 * streams (`/sources/{id}/sse` and `/workflows/{id}/sse`, no `/v1`) are served apart, outside the
 * JSON pipeline.
 */
export function createLocalServer(routes: readonly AnyRoute[], deps: Deps, options: LocalServerOptions): LocalServer {
  const match = createRouter(routes);
  const handlers = new Map(routes.map((route) => [route, createHttpHandler(route, async () => deps)]));
  const streams = new SourceStreamServer({ deps, bus: options.bus, ...options.stream });
  const { files } = options;
  const fileSlots = options.fileTransfers ?? new FileTransferSlots(maxFileTransfersFor(serverOpenFilesLimit()));

  async function handle(request: IncomingMessage, response: ServerResponse, line: RequestLine): Promise<void> {
    const { requestId, method } = line;
    const url = requestUrl(request.url ?? "/");
    if (!url) {
      request.resume();
      const refused = new DomainError("validation", "the request target is not a path");
      return send(response, errorResult(refused, requestId, undefined));
    }
    const endpoint = ENDPOINT_PATH.exec(url.pathname);
    if (endpoint?.[1]) {
      line.path = ENDPOINT_LOG_PATH;
      return handleEndpoint(deps, request, response, url, endpoint[1], endpoint[2] ?? "/", line);
    }
    // Past the endpoints (the hot path, logged by their own placeholder): a pause's URL, or one that
    // looks like it, is never logged with its secret.
    const logged = url.pathname.includes("%") ? decodeSegment(url.pathname) : url.pathname;
    line.path = FLOW_LOG_MASK.test(logged) ? FLOW_LOG_PATH : FILE_LOG_MASK.test(logged) ? FILE_LOG_PATH : url.pathname;
    // Its path is logged as FILE_LOG_PATH above: the token is the authority, never logged.
    const file = FILE_URL_PATH.exec(url.pathname)?.[1];
    if (file && files) return handleFileRequest(files, fileSlots, request, response, file, requestId, deps.log);
    const flow = FLOW_PATH.exec(url.pathname);
    if (flow?.[1] && flow[2] && flow[3]) {
      return handleFlow(deps, request, response, url, flow[1], flow[2], flow[3] as "resume" | "cancel");
    }
    const stream = STREAM_PATH.exec(url.pathname);
    if (stream?.[1])
      return streams.handle(request, response, url, { kind: "source", id: decodeSegment(stream[1]) }, requestId);
    const workflowStream = WORKFLOW_STREAM_PATH.exec(url.pathname);
    if (workflowStream?.[1]) {
      return streams.handle(
        request,
        response,
        url,
        { kind: "workflow", id: decodeSegment(workflowStream[1]) },
        requestId,
      );
    }
    const found = match(method, url.pathname);
    if (found.kind !== "found") {
      request.resume();
      return send(response, unroutedResult(method, url.pathname, requestId));
    }
    let body: Buffer;
    try {
      body = await readBody(request, MAX_JSON_BODY_BYTES);
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) throw error;
      const tooLarge = new DomainError("payload_too_large", `request body is larger than ${MAX_JSON_BODY_BYTES} bytes`);
      return send(response, errorResult(tooLarge, requestId, undefined));
    }
    const event = toApiGatewayEvent(
      request,
      url,
      body,
      { routeKey: `${found.route.method} ${found.route.path}`, pathParameters: found.params },
      requestId,
      Date.now(),
    );
    const handler = handlers.get(found.route);
    send(response, await handler!(event, lambdaContext(requestId, found.route) as never));
  }

  const server = createServer((request, response) => {
    const startedMs = performance.now();
    // A target that is not a path is logged as "-"; an endpoint's key never is (ENDPOINT_LOG_PATH).
    const line: RequestLine = {
      method: request.method ?? "GET",
      path: "-",
      status: undefined,
      durationMs: 0,
      requestId: randomUUID(),
    };
    response.once("close", () => {
      line.durationMs = performance.now() - startedMs;
      if (response.headersSent) line.status = response.statusCode;
      if (!response.writableFinished) line.aborted = true;
      logRequest(deps.log, line);
    });
    handle(request, response, line).catch((error) => {
      deps.log.error("request failed outside the handler", { request_id: line.requestId, error: String(error) });
      if (!response.headersSent) send(response, errorResult(error, line.requestId, undefined));
      else response.destroy();
    });
  });
  server.on("clientError", answerClientError);
  // Component code can open connections to this server from its sandbox: never so many that the
  // server has no descriptor left for its own files and children (connection-cap.ts).
  server.maxConnections = serverMaxConnections();
  return { server, streams };
}
