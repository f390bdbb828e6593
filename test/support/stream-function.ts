/**
 * Calling the AWS stream function (`functions/internal/source-stream-function.ts`) in-process: the
 * function URL request, the Lambda context, the response stream it writes to, and the globals of
 * Lambda's Node.js runtime.
 */
import { performance } from "node:perf_hooks";
import { Writable } from "node:stream";
import { type SseMessage, sseParser } from "./sse-client.ts";

/**
 * The `Writable` the handler writes its response to (Lambda's response stream), recording and
 * parsing what arrives. A `stuck` client takes the first chunk (the opening frame) and
 * acknowledges nothing after it, so every later write sees backpressure.
 */
export function recordedResponse(options: { stuck?: boolean } = {}) {
  const chunks: string[] = [];
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  const parser = sseParser(
    (message) => messages.push(message),
    (comment) => comments.push(comment),
  );
  const out = new Writable({
    highWaterMark: options.stuck ? 1 : 16 * 1024,
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      parser.feed(String(chunk));
      if (!options.stuck || chunks.length === 1) callback();
    },
  });
  return { out, text: () => chunks.join(""), messages, comments };
}

/** A function URL request (payload format 2.0), its request id `url-req-1`. */
export function functionUrlRequest(path: string, headers: Record<string, string> = {}, query = "", method = "GET") {
  return {
    version: "2.0",
    rawPath: path,
    rawQueryString: query,
    headers,
    requestContext: { requestId: "url-req-1", http: { method } },
  };
}

/** A Lambda context whose function times out `windowMs` from now; `cutTo(ms)` leaves it `ms`. */
export function lambdaContext(windowMs: number) {
  let end = performance.now() + windowMs;
  return {
    awsRequestId: "lambda-req-1",
    getRemainingTimeInMillis: () => end - performance.now(),
    cutTo(ms: number) {
      end = performance.now() + ms;
    },
  };
}

/**
 * Installs the `awslambda` global of Lambda's Node.js runtime: `streamifyResponse` (wrapping with
 * `wrap`, by default returning the handler itself) and `HttpResponseStream.from`, which records
 * each response's status and headers. `remove()` takes it away again.
 */
export function fakeLambdaRuntime(wrap: (handler: unknown) => unknown = (handler) => handler) {
  const streamified: unknown[] = [];
  const metadata: unknown[] = [];
  (globalThis as { awslambda?: unknown }).awslambda = {
    streamifyResponse: (handler: unknown) => {
      streamified.push(handler);
      return wrap(handler);
    },
    HttpResponseStream: {
      from: (stream: Writable, meta: unknown) => {
        metadata.push(meta);
        return stream;
      },
    },
  };
  return {
    streamified,
    metadata,
    remove: () => delete (globalThis as { awslambda?: unknown }).awslambda,
  };
}
