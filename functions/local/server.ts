import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Context } from "aws-lambda";
import { DomainError } from "#core/errors";
import type { Deps } from "#ports/deps";
import { MAX_JSON_BODY_BYTES } from "#http/limits";
import { createHttpHandler, errorResult, type HttpResult } from "#http/pipeline";
import type { AnyRoute } from "#http/route";
import { unroutedResult } from "#http/route-not-found";
import { createRouter } from "#http/routing";
import { toApiGatewayEvent } from "./api-gateway-event.ts";

class BodyTooLargeError extends Error {}

/** Reads a request body, giving up (without buffering the rest) past `limit` bytes. */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers["content-length"] ?? 0);
    if (declared > limit) return reject(new BodyTooLargeError());
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        request.removeAllListeners("data");
        request.resume();
        reject(new BodyTooLargeError());
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => resolve(Buffer.concat(chunks)));
    request.on("error", reject);
  });
}

function send(response: ServerResponse, result: HttpResult, closeConnection = false): void {
  const headers: Record<string, string> = { ...result.headers };
  if (closeConnection) headers.connection = "close";
  response.writeHead(result.statusCode, headers);
  response.end(result.body);
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
 * The local REST API: one Node HTTP server that routes each request with the manifest, turns it
 * into the API Gateway event the deployed Lambda would receive, and calls the same handler.
 */
export function createLocalServer(routes: readonly AnyRoute[], deps: Deps): Server {
  const match = createRouter(routes);
  const handlers = new Map(routes.map((route) => [route, createHttpHandler(route, async () => deps)]));

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const method = request.method ?? "GET";
    const url = new URL(request.url ?? "/", "http://localhost");
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
      // The rest of the body is not read, so the connection cannot carry another request.
      return send(response, errorResult(tooLarge, requestId, undefined), true);
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

  return createServer((request, response) => {
    handle(request, response).catch((error) => {
      const requestId = randomUUID();
      deps.log.error("request failed outside the handler", { request_id: requestId, error: String(error) });
      if (!response.headersSent) send(response, errorResult(error, requestId, undefined));
      else response.destroy();
    });
  });
}
