/**
 * The pure parts of a source's HTTP interface (`$.interface.http`, real-behaviour.md §1.2): the
 * event `run` receives, the CORS preflight answer, and the fixed responses the endpoint gives
 * when the source itself does not answer.
 *
 * The same functions serve local mode (a Node request) and AWS (an API Gateway event): each
 * turns its request into an {@link IncomingHttpRequest} first.
 */
import type { HttpResponseSpec, HttpRunEvent, Json } from "#runtime/protocol";
import { HOPS_HEADER, MAX_DELIVERY_HOPS } from "./hops.ts";
import { nestsTooDeep } from "./json-depth.ts";
import type { QuotaRefusal } from "./quotas.ts";

/** A request to a source's endpoint, independent of where it arrived. */
export interface IncomingHttpRequest {
  method: string;
  /** Path below the endpoint, starting with `/`. */
  path: string;
  /** The query string without `?`, still encoded. */
  rawQuery: string;
  /** As Node gives them: any case, repeated headers as arrays. */
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  clientIp: string;
  /** The full URL the client called. */
  url: string;
}

/** Larger request bodies are refused with {@link PAYLOAD_TOO_LARGE_RESPONSE} (real-behaviour.md §1.2). */
export const MAX_HTTP_INTERFACE_BODY_BYTES = 512 * 1024;

/** Status of {@link RESPOND_TIMEOUT_RESPONSE}. */
export const NO_RESPONSE_TIMEOUT_STATUS = 504;

type JsonObject = { [key: string]: Json };

/**
 * Builds the event of `run` from a request. Never throws: malformed input degrades to the raw
 * string.
 *
 * - Header names are lower-cased; repeated values (including `set-cookie`) are joined with `", "`.
 * - `query`: repeated keys become arrays.
 * - `bodyRaw`: the body decoded as UTF-8 whatever the charset (binary bodies come out lossy).
 * - `body`: JSON (`application/json`, `*+json`) parsed, or the raw string when it is not valid
 *   JSON or nests deeper than `MAX_JSON_DEPTH`; `application/x-www-form-urlencoded` as an object of fields; `multipart/form-data` as
 *   an object with one key per field, files as `{filename, mimetype, size}` (the original adds a
 *   temporary `url` to the file; Sluice keeps no uploads, so there is none); any other type as
 *   the raw string. Absent when the body is empty.
 */
export function toHttpRunEvent(request: IncomingHttpRequest): HttpRunEvent {
  const headers = normaliseHeaders(request.headers);
  const bodyRaw = request.body.toString("utf8");
  const path = request.path.startsWith("/") ? request.path : `/${request.path}`;
  const event: HttpRunEvent = {
    method: request.method.toUpperCase(),
    path,
    query: parseFields(request.rawQuery.startsWith("?") ? request.rawQuery.slice(1) : request.rawQuery),
    headers,
    bodyRaw,
    url: request.url,
    client_ip: request.clientIp,
  };
  if (request.body.length > 0) event.body = parseBody(request.body, bodyRaw, headers["content-type"]);
  return event;
}

/**
 * Headers of the answer to an `OPTIONS` request (which does not run the source). The allowed
 * headers echo the request's `Access-Control-Request-Headers`, because the `*` wildcard does not
 * cover `Authorization` in browsers.
 */
export function corsPreflightHeaders(
  requestHeaders: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const requested = normaliseHeaders(requestHeaders)["access-control-request-headers"]?.trim();
  return {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET,HEAD,PUT,PATCH,POST,DELETE",
    "access-control-allow-headers": requested ? requested : "*",
  };
}

/** The whole answer to an `OPTIONS` request: 204 with {@link corsPreflightHeaders}. */
export function corsPreflightResponse(requestHeaders: Record<string, string | string[] | undefined>): HttpResponseSpec {
  return { status: 204, headers: corsPreflightHeaders(requestHeaders), body: "" };
}

export function fixedJsonResponse(
  status: number,
  body: Json,
  extraHeaders: Record<string, string> = {},
): HttpResponseSpec {
  return Object.freeze({
    status,
    headers: Object.freeze({
      "content-type": "application/json; charset=utf-8",
      "access-control-allow-origin": "*",
      ...extraHeaders,
    }),
    body: JSON.stringify(body),
  });
}

/**
 * Given at once when the source has `customResponse: false`, before and whatever `run` does
 * (issue #5530). The original answers a small fixed 200 body; Sluice's is JSON.
 */
export const DEFAULT_HTTP_RESPONSE: HttpResponseSpec = fixedJsonResponse(200, { success: true });

/**
 * The answer of a deactivated source's endpoint; the event is not run. 200, not 4xx: the
 * original moved from 400 to 200 (issue #6157) because webhook senders disable or endlessly
 * retry endpoints that fail. The body says why and the `x-sluice-source-inactive` header lets
 * tools tell it apart from an accepted request.
 */
export const INACTIVE_SOURCE_RESPONSE: HttpResponseSpec = fixedJsonResponse(
  200,
  {
    success: false,
    error: "this source is inactive: the request was not processed",
    hint: 'activate it with PUT /sources/{id} and {"active": true}',
  },
  { "x-sluice-source-inactive": "1" },
);

/** `customResponse: true` and `run` did not call `respond` before the run's deadline. */
export const RESPOND_TIMEOUT_RESPONSE: HttpResponseSpec = fixedJsonResponse(NO_RESPONSE_TIMEOUT_STATUS, {
  error: "the source did not respond in time",
});

/** `customResponse: true` and `run` returned without calling `respond` (real-behaviour.md §1.2: 400). */
export const ENDED_WITHOUT_RESPOND_RESPONSE: HttpResponseSpec = fixedJsonResponse(400, {
  error: "the source ended without calling respond",
});

/** `customResponse: true` and `run` threw before calling `respond` (issue #5530: 400). */
export const FAILED_BEFORE_RESPOND_RESPONSE: HttpResponseSpec = fixedJsonResponse(400, {
  error: "the source failed before responding",
});

/**
 * The request passed through more webhook deliveries than a chain may (`#core/hops`): a delivery
 * loop. The source is not run. 508 Loop Detected (RFC 5842), which Sluice's own deliveries do not
 * retry.
 */
export const LOOP_DETECTED_RESPONSE: HttpResponseSpec = fixedJsonResponse(508, {
  error: `loop detected: this request passed through more than ${MAX_DELIVERY_HOPS} webhook deliveries (${HOPS_HEADER})`,
});

/** No source has this endpoint key (never had, or deleted). */
export const UNKNOWN_ENDPOINT_RESPONSE: HttpResponseSpec = fixedJsonResponse(404, {
  error: "no source or active workflow listens at this endpoint",
});

/**
 * The workspace is over its runs-per-minute or a daily quota: 429 (real-behaviour.md §1.2, "429 when
 * throttled") saying which, with `retry-after` in seconds until the quota's window ends. The source
 * is not run.
 */
export function quotaExceededResponse(refusal: QuotaRefusal): HttpResponseSpec {
  const retry: Record<string, string> =
    refusal.retryAfterSeconds === undefined ? {} : { "retry-after": String(refusal.retryAfterSeconds) };
  return fixedJsonResponse(
    429,
    { error: `quota exceeded: ${refusal.message}`, quota: refusal.quota, limit: refusal.limit },
    retry,
  );
}

/**
 * `customResponse: true` and the response the source gave is over a limit or malformed
 * (`checkResponse` in run-limits.ts): the server answers 502 rather than pass it on. Its `$errors`
 * says why.
 */
export const REFUSED_RESPONSE_RESPONSE: HttpResponseSpec = fixedJsonResponse(502, {
  error: "the source's response was refused: see the source's $errors",
});

/** The request body is over {@link MAX_HTTP_INTERFACE_BODY_BYTES}; the source is not run. */
export const PAYLOAD_TOO_LARGE_RESPONSE: HttpResponseSpec = fixedJsonResponse(413, {
  error: `the request body is larger than ${MAX_HTTP_INTERFACE_BODY_BYTES} bytes`,
});

function normaliseHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = headers[name];
    if (value === undefined || value === null) continue;
    const text =
      typeof value === "string" ? value : Array.isArray(value) ? value.map(String).join(", ") : String(value);
    const key = name.toLowerCase();
    setOwn(out, key, Object.hasOwn(out, key) ? `${out[key]}, ${text}` : text);
  }
  return out;
}

/**
 * Sets a key as an own property, so that a field named `__proto__` stays data. Plain assignment
 * does the same for every other key and keeps the object fast (one `defineProperty` per header
 * was a visible share of the ingest path).
 */
function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/** Query strings and urlencoded forms: repeated keys become arrays. */
function parseFields(text: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  // Most endpoint requests have no query string: no `URLSearchParams` for them.
  if (text === "") return out;
  for (const [key, value] of new URLSearchParams(text)) addField(out, key, value);
  return out;
}

function addField<T>(target: Record<string, T | T[]>, key: string, value: T): void {
  if (!Object.hasOwn(target, key)) {
    setOwn(target, key, value);
    return;
  }
  const existing = target[key] as T | T[];
  // The arrays are ours (made here), so a repeated field is pushed, not copied: copying made a
  // body of many repeats quadratic.
  if (Array.isArray(existing)) existing.push(value);
  else setOwn(target, key, [existing, value]);
}

interface MediaType {
  type: string;
  params: Record<string, string>;
}

function parseMediaType(header: string | undefined): MediaType {
  if (!header) return { type: "", params: {} };
  const semicolon = header.indexOf(";");
  const type = (semicolon < 0 ? header : header.slice(0, semicolon)).trim().toLowerCase();
  return { type, params: semicolon < 0 ? {} : parseParams(header.slice(semicolon)) };
}

/** `; a=1; b="quoted \" value"` → `{a: "1", b: 'quoted " value'}`, names lower-cased. */
function parseParams(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const pattern = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  for (const match of text.matchAll(pattern)) {
    const name = (match[1] ?? "").toLowerCase();
    const value = match[2] !== undefined ? match[2].replace(/\\(.)/g, "$1") : (match[3] ?? "").trim();
    if (!Object.hasOwn(out, name)) setOwn(out, name, value);
  }
  return out;
}

function parseBody(body: Buffer, bodyRaw: string, contentType: string | undefined): Json {
  const media = parseMediaType(contentType);
  if (media.type === "application/json" || media.type.endsWith("+json")) {
    const text = bodyRaw.charCodeAt(0) === 0xfeff ? bodyRaw.slice(1) : bodyRaw;
    // Nested past the limit, it stays text: as JSON it would overflow the stack when stored.
    if (nestsTooDeep(text)) return bodyRaw;
    try {
      return JSON.parse(text) as Json;
    } catch {
      return bodyRaw;
    }
  }
  if (media.type === "application/x-www-form-urlencoded") return parseFields(bodyRaw);
  if (media.type === "multipart/form-data") {
    const boundary = media.params.boundary;
    return (boundary && parseMultipart(body, boundary)) || bodyRaw;
  }
  return bodyRaw;
}

/** An uploaded file as `run` sees it. */
export interface UploadedFileField {
  filename: string;
  mimetype: string;
  /** Bytes. */
  size: number;
}

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");

/**
 * RFC 7578 `multipart/form-data`. Returns undefined when the body has no part delimited by the
 * boundary, so the caller falls back to the raw string. Parts without a `name` are ignored; a
 * part cut short by the end of the body is dropped.
 */
function parseMultipart(body: Buffer, boundary: string): JsonObject | undefined {
  const delimiter = Buffer.from(`--${boundary}`);
  const nextDelimiter = Buffer.from(`\r\n--${boundary}`);
  const fields: Record<string, Json> = {};
  let position = body.indexOf(delimiter);
  if (position < 0) return undefined;
  let parts = 0;
  while (position >= 0) {
    position += delimiter.length;
    if (body[position] === 0x2d && body[position + 1] === 0x2d) break; // "--": the closing delimiter
    const lineEnd = body.indexOf(CRLF, position); // skips transport padding after the delimiter
    if (lineEnd < 0) break;
    const start = lineEnd + CRLF.length;
    const end = body.indexOf(nextDelimiter, start);
    if (end < 0) break;
    const field = parsePart(body.subarray(start, end));
    if (field) {
      addField(fields, field.name, field.value);
      parts += 1;
    }
    position = end + CRLF.length;
  }
  return parts > 0 ? fields : undefined;
}

function parsePart(part: Buffer): { name: string; value: Json } | undefined {
  let headerText = "";
  let content: Buffer;
  if (part.subarray(0, CRLF.length).equals(CRLF)) {
    content = part.subarray(CRLF.length); // a part without headers
  } else {
    const headerEnd = part.indexOf(HEADER_END);
    if (headerEnd < 0) return undefined;
    headerText = part.subarray(0, headerEnd).toString("utf8");
    content = part.subarray(headerEnd + HEADER_END.length);
  }
  const headers: Record<string, string> = {};
  for (const line of headerText.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0) setOwn(headers, line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  const disposition = parseMediaType(headers["content-disposition"]);
  const name = disposition.params.name;
  if (name === undefined) return undefined;
  const filename = decodeExtendedValue(disposition.params["filename*"]) ?? disposition.params.filename;
  if (filename === undefined) return { name, value: content.toString("utf8") };
  const file: UploadedFileField = {
    filename,
    mimetype: parseMediaType(headers["content-type"]).type || "application/octet-stream",
    size: content.length,
  };
  return { name, value: { ...file } };
}

/** RFC 5987 `UTF-8''na%C3%AFve.txt`; undefined when absent or undecodable. */
function decodeExtendedValue(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const match = /^([^']*)'[^']*'(.*)$/.exec(value);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[2] ?? "");
  } catch {
    return undefined;
  }
}
