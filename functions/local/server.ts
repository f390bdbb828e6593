import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Context } from "aws-lambda";
import { DomainError } from "#core/errors";
import { receiveHttpRequest } from "#core/http-interface";
import { MAX_HTTP_INTERFACE_BODY_BYTES, PAYLOAD_TOO_LARGE_RESPONSE } from "#core/http-run-event";
import { MAX_JSON_BODY_BYTES } from "#http/limits";
import { createHttpHandler, errorResult, type HttpResult } from "#http/pipeline";
import type { AnyRoute } from "#http/route";
import { unroutedResult } from "#http/route-not-found";
import { createRouter } from "#http/routing";
import type { Deps } from "#ports/deps";
import type { HttpResponseSpec } from "#runtime/protocol";
import { toApiGatewayEvent } from "./api-gateway-event.ts";
import { SourceStreamServer, type SourceStreamServerOptions, STREAM_PATH } from "./source-stream-server.ts";

class BodyTooLargeError extends Error {}

/**
 * After a 413, the rest of an oversized body is read and thrown away so the client can read the
 * answer (closing at once would reset its upload), but only up to this many bytes.
 */
const DISCARD_AFTER_413_BYTES = 8 * 1024 * 1024;

/** Reads a request body, giving up (and discarding the rest, bounded) past `limit` bytes. */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const overflow = () => {
      request.removeAllListeners("data");
      let discarded = 0;
      request.on("data", (chunk: Buffer) => {
        discarded += chunk.length;
        if (discarded > DISCARD_AFTER_413_BYTES) request.destroy();
      });
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

function send(response: ServerResponse, result: HttpResult): void {
  response.writeHead(result.statusCode, result.headers);
  response.end(result.body);
}

function sendSpec(response: ServerResponse, spec: HttpResponseSpec): void {
  const body = Buffer.from(spec.body, spec.bodyEncoding === "base64" ? "base64" : "utf8");
  response.writeHead(spec.status, { ...spec.headers, "content-length": String(body.length) });
  response.end(body);
}

/** `/http/<key>` and `/http/<key>/<path>`: a source's HTTP interface endpoint. */
const ENDPOINT_PATH = /^\/http\/([A-Za-z0-9_-]{1,64})(\/.*)?$/;

async function handleEndpoint(
  deps: Deps,
  request: IncomingMessage,
  response: ServerResponse,
  url: URL,
  endpointKey: string,
  path: string,
): Promise<void> {
  let body: Buffer;
  try {
    body = await readBody(request, MAX_HTTP_INTERFACE_BODY_BYTES);
  } catch (error) {
    if (!(error instanceof BodyTooLargeError)) throw error;
    return sendSpec(response, PAYLOAD_TOO_LARGE_RESPONSE);
  }
  const spec = await receiveHttpRequest(deps, endpointKey, {
    method: request.method ?? "GET",
    path,
    rawQuery: url.search.slice(1),
    headers: request.headers,
    body,
    clientIp: request.socket.remoteAddress ?? "",
    url: `${deps.runtime.publicUrl}${url.pathname}${url.search}`,
  });
  sendSpec(response, spec);
}

/** A minimal Lambda context: enough for middy, with no deadline (local requests do not time out early). */
function lambdaContext(requestId: string, route: AnyRoute): Context {
  return {
    awsRequestId: requestId,
    functionName: `local-${route.name}`,
    callbackWaitsForEmptyEventLoop: false,
  } as Context;
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
 * streams (`/sources/{id}/sse`, no `/v1`) are served apart, outside the JSON pipeline.
 */
export function createLocalServer(routes: readonly AnyRoute[], deps: Deps, options: LocalServerOptions): LocalServer {
  const match = createRouter(routes);
  const handlers = new Map(routes.map((route) => [route, createHttpHandler(route, async () => deps)]));
  const streams = new SourceStreamServer({ deps, bus: options.bus, ...options.stream });

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const method = request.method ?? "GET";
    const url = new URL(request.url ?? "/", "http://localhost");
    const endpoint = ENDPOINT_PATH.exec(url.pathname);
    if (endpoint?.[1]) return handleEndpoint(deps, request, response, url, endpoint[1], endpoint[2] ?? "/");
    const stream = STREAM_PATH.exec(url.pathname);
    if (stream?.[1]) return streams.handle(request, response, url, decodeSegment(stream[1]));
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
    handle(request, response).catch((error) => {
      const requestId = randomUUID();
      deps.log.error("request failed outside the handler", { request_id: requestId, error: String(error) });
      if (!response.headersSent) send(response, errorResult(error, requestId, undefined));
      else response.destroy();
    });
  });
  return { server, streams };
}
