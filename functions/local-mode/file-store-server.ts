/**
 * Local mode's File Store URLs, `GET` and `PUT /files/<token>/<name>` (what `$.files` reads and
 * writes, and what `toUrl()` hands out): the token is the whole authority, as a pre-signed S3 URL's
 * signature is; there is no API key. A GET token reads, a PUT token replaces; neither does the other.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import type { DiskFileStore } from "#adapters/local/disk-file-store";
import { DomainError, isDomainError } from "#core/errors";
import type { Logger } from "#core/ports/logger";
import { errorResult } from "#http/responses";
import { discardRest } from "./discard-body.ts";
import type { FileTransferSlots } from "./file-transfer-slots.ts";

/**
 * Content types by file extension: local mode keeps no type with a file, so a shared URL of a
 * picture or a document opens as one. Types a browser would run as a page of this origin (HTML,
 * SVG, XML) are served as plain text or bytes; everything else as bytes.
 */
const CONTENT_TYPES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  json: "application/json",
  txt: "text/plain; charset=utf-8",
  csv: "text/csv; charset=utf-8",
  md: "text/plain; charset=utf-8",
  html: "text/plain; charset=utf-8",
  mp3: "audio/mpeg",
  mp4: "video/mp4",
  zip: "application/zip",
};

export function contentTypeOf(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
  return Object.hasOwn(CONTENT_TYPES, extension) ? (CONTENT_TYPES[extension] as string) : "application/octet-stream";
}

/** Errors of a request its client cut short: nothing to answer, and nothing wrong with the server. */
const CUT_SHORT = new Set(["ECONNRESET", "ERR_STREAM_PREMATURE_CLOSE", "ECONNABORTED", "EPIPE"]);

export async function handleFileRequest(
  store: DiskFileStore,
  slots: FileTransferSlots,
  request: IncomingMessage,
  response: ServerResponse,
  token: string,
  requestId: string,
  log: Logger,
): Promise<void> {
  const fail = (error: unknown, headers: Record<string, string> = {}) => {
    // What the client still sends is read and dropped, bounded: a refusal never reads a body whole.
    if (!request.readableEnded) discardRest(request);
    const result = errorResult(error, requestId, log);
    response.writeHead(result.statusCode, { ...result.headers, ...headers });
    response.end(result.body);
  };
  const method = request.method === "HEAD" ? "GET" : request.method;
  if (method !== "GET" && method !== "PUT") {
    return fail(new DomainError("method_not_allowed", `${request.method} is not allowed on a file URL (GET or PUT)`));
  }
  const grant = await store.openToken(token);
  if ("refused" in grant) return fail(new DomainError("forbidden", grant.refused));
  if (grant.method !== method) {
    return fail(new DomainError("forbidden", `this file URL is for ${grant.method}, not ${method}`));
  }
  const release = slots.take(grant.project);
  if (!release) {
    log.warn("file transfer refused: too many in flight", { request_id: requestId, in_flight: slots.inFlight });
    const busy = new DomainError("unavailable", "too many File Store transfers are in flight: try again shortly");
    return fail(busy, { "retry-after": "1" });
  }
  // The slot is held while the file is: until the upload is placed or dropped, or the download
  // ends; a client that stops sending or reading is cut, and so gives it back.
  const stopWatching = slots.watchIdle(request.socket);
  try {
    if (method === "PUT") {
      const declared = request.headers["content-length"];
      const length = declared === undefined ? undefined : Number(declared);
      await store.write(grant.project, grant.path, request, Number.isSafeInteger(length) ? length : undefined);
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ path: grant.path }));
      return;
    }
    const file = await store.read(grant.project, grant.path);
    if (!file) return fail(new DomainError("not_found", `there is no file "${grant.path}" in the File Store`));
    response.writeHead(200, {
      "content-type": contentTypeOf(grant.path),
      "content-length": String(file.size),
      "cache-control": "private, no-store",
      // A user's file is never run as a page of this origin, nor sniffed into one.
      "content-security-policy": "sandbox",
      "x-content-type-options": "nosniff",
    });
    if (request.method === "HEAD") {
      file.stream.destroy();
      response.end();
      return;
    }
    // Either side ending early ends both: the file's descriptor is never left open.
    await pipeline(file.stream, response).catch(() => {});
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (!isDomainError(error) && (request.destroyed || (code !== undefined && CUT_SHORT.has(code)))) {
      // The client went away mid-upload: the upload is dropped (nothing was placed).
      log.info("file upload cut short", { request_id: requestId, path: grant.path });
      response.destroy();
      return;
    }
    if (!response.headersSent) return fail(error);
    response.destroy();
  } finally {
    stopWatching();
    release();
  }
}
