/**
 * The normal form of `this.<http>.respond({status, headers, body})` (component-model.md "Interface
 * props", real-behaviour.md §1.2). Used inside the runtime on what the code passed, and again by
 * trusted code on what a runtime sent, since a component can send anything over its channel.
 */
import type { HttpResponseSpec } from "./protocol.ts";

export const STATUS_MESSAGE = "status must be an integer from 200 to 599";

/** Largest body a response may carry, in bytes (after base64 decoding). Lambda's 6 MB payload holds it base64-encoded. */
export const RESPONSE_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Most headers a response may carry, and their total size (`name: value` bytes). */
export const RESPONSE_MAX_HEADERS = 64;
export const RESPONSE_MAX_HEADER_BYTES = 16 * 1024;

/**
 * Headers that describe the connection or the framing of the message, not the message: the
 * server frames the response itself, so a component never sets them. `Transfer-Encoding` beside a
 * `Content-Length`, or two different `Content-Length`s, would let the answer smuggle a second
 * response into a kept-alive connection. Names starting with `proxy-` go too.
 */
const FRAMING_HEADERS = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "te",
  "trailer",
  "upgrade",
  "http2-settings",
]);
/** RFC 9110 `token`. */
export const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What Node writes without refusing: no CR, LF, NUL or other controls but tab, nothing past U+00FF. */
export const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

type Bag = Record<string, unknown>;

const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Validates and normalises a response: `status` may be a numeric string ("200" from a string prop,
 * as registry components pass it); headers go through {@link responseHeaders}; a string body stays
 * as is, bytes (Buffer, Uint8Array, ArrayBuffer) become base64 with `bodyEncoding: "base64"`,
 * anything else becomes JSON with `content-type: application/json` unless the code set a content
 * type. A stream body is refused here: the caller reads it first ({@link readStreamBody}).
 *
 * @throws Error {@link STATUS_MESSAGE} for a missing or out-of-range status (a 1xx is an interim
 * answer, never a final one); TypeError when the argument is not an object or the body cannot be
 * serialised; RangeError when the body or the headers are over their limits.
 */
export function normalizeResponse(spec: unknown): HttpResponseSpec {
  if (!isBag(spec)) throw new TypeError("respond expects an object: { status, headers, body }");
  const status = typeof spec.status === "string" && /^\s*\d+\s*$/.test(spec.status) ? Number(spec.status) : spec.status;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
    throw new Error(STATUS_MESSAGE);
  }
  const { headers, cookies } = answerHeaders(spec.headers, spec.cookies);
  checkHeaderLimits(headers, cookies);
  const response = withBody(status, headers, spec);
  if (cookies.length > 0) response.cookies = cookies;
  const bytes =
    response.bodyEncoding === "base64"
      ? Buffer.byteLength(response.body, "base64")
      : Buffer.byteLength(response.body, "utf8");
  if (bytes > RESPONSE_MAX_BODY_BYTES) {
    throw new RangeError(`respond: the body is ${bytes} bytes, over the limit of ${RESPONSE_MAX_BODY_BYTES}`);
  }
  return response;
}

function withBody(status: number, headers: Record<string, string>, spec: Bag): HttpResponseSpec {
  const { body } = spec;
  if (body === undefined || body === null) return { status, headers, body: "" };
  if (typeof body === "string") {
    // Already normal (a runtime's message seen by trusted code) or the code's own base64 text.
    return spec.bodyEncoding === "base64"
      ? { status, headers, body, bodyEncoding: "base64" }
      : { status, headers, body };
  }
  const bytes = asBytes(body);
  if (bytes) return { status, headers, body: bytes.toString("base64"), bodyEncoding: "base64" };
  if (isStreamBody(body)) throw new TypeError("respond: a stream body must be read first (await the respond)");
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (error) {
    throw new TypeError(`respond: the body cannot be serialised as JSON: ${(error as Error).message}`);
  }
  if (json === undefined) throw new TypeError("respond: the body must be a string, a Buffer or JSON-serialisable");
  if (!Object.keys(headers).some((name) => name.toLowerCase() === "content-type")) {
    headers["content-type"] = "application/json";
  }
  return { status, headers, body: json };
}

const SET_COOKIE = "set-cookie";

/** A header value as text, if HTTP can carry it (no CR, LF or other control but tab). */
function headerText(value: unknown): string | undefined {
  const text = String(value);
  return HEADER_VALUE.test(text) ? text : undefined;
}

/**
 * The headers a component may set, as strings (arrays joined with `, `): framing and hop-by-hop
 * headers ({@link FRAMING_HEADERS}, `proxy-*`), names that are not HTTP tokens and values with
 * characters HTTP cannot carry are dropped, and of two names that differ only in case the first
 * stays. The servers run it again right before writing (local server, API Gateway result), whatever
 * the response went through before. Given `cookies`, every `Set-Cookie` value (under any spelling,
 * each value of an array) goes there instead, one each ({@link answerHeaders}).
 */
export function responseHeaders(headers: unknown, cookies?: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isBag(headers)) return out;
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || value === null) continue;
    const lower = name.toLowerCase();
    if (cookies && lower === SET_COOKIE) {
      for (const each of Array.isArray(value) ? value : [value]) {
        const text = each === undefined || each === null ? undefined : headerText(each);
        if (text !== undefined) cookies.push(text);
      }
      continue;
    }
    if (seen.has(lower) || FRAMING_HEADERS.has(lower) || lower.startsWith("proxy-") || !HEADER_NAME.test(name)) {
      continue;
    }
    const text = headerText(Array.isArray(value) ? value.map(String).join(", ") : value);
    if (text === undefined) continue;
    seen.add(lower);
    out[name] = text;
  }
  return out;
}

/**
 * What a server writes of a response's headers: the headers as {@link responseHeaders} filters
 * them, and the `Set-Cookie` values apart, one header each: those among `headers`, then `cookies`
 * (the form {@link normalizeResponse} gives, read again by trusted code). Unlike other headers
 * cookies are never joined with `, `: a client reads joined cookies as one, whose attributes
 * swallow the next (an `Expires` date has a comma of its own).
 */
export function answerHeaders(
  headers: unknown,
  cookies?: unknown,
): { headers: Record<string, string>; cookies: string[] } {
  const kept: string[] = [];
  const others = responseHeaders(headers, kept);
  if (Array.isArray(cookies)) {
    for (const each of cookies) {
      const text = typeof each === "string" ? headerText(each) : undefined;
      if (text !== undefined) kept.push(text);
    }
  }
  return { headers: others, cookies: kept };
}

function checkHeaderLimits(headers: Record<string, string>, cookies: readonly string[]): void {
  const names = Object.keys(headers);
  const count = names.length + cookies.length;
  if (count > RESPONSE_MAX_HEADERS) {
    throw new RangeError(`respond: ${count} headers, over the limit of ${RESPONSE_MAX_HEADERS}`);
  }
  let bytes = 0;
  // Values hold no character past U+00FF (responseHeaders), which go out as one byte each.
  for (const name of names) bytes += name.length + 2 + (headers[name] as string).length;
  for (const cookie of cookies) bytes += SET_COOKIE.length + 2 + cookie.length;
  if (bytes > RESPONSE_MAX_HEADER_BYTES) {
    throw new RangeError(`respond: the headers are ${bytes} bytes, over the limit of ${RESPONSE_MAX_HEADER_BYTES}`);
  }
}

/**
 * Whether a respond's body is a stream to read first: a Node `Readable` (what the original's
 * `$.respond` takes, awaited) or a web `ReadableStream`.
 */
export function isStreamBody(body: unknown): body is AsyncIterable<unknown> {
  if (typeof body !== "object" || body === null) return false;
  const stream = body as { pipe?: unknown; getReader?: unknown; [Symbol.asyncIterator]?: unknown };
  return (
    typeof stream[Symbol.asyncIterator] === "function" &&
    (typeof stream.pipe === "function" || typeof stream.getReader === "function")
  );
}

/**
 * For a respond whose body is a stream ({@link isStreamBody}): the spec with the body read into
 * one Buffer, which {@link normalizeResponse} takes as bytes; undefined for any other respond.
 * Chunks must be bytes or text; reading stops past {@link RESPONSE_MAX_BODY_BYTES}, and leaving the
 * loop early ends the stream (a `Readable`'s iterator destroys it, a web stream's cancels it).
 *
 * @throws (the promise) TypeError for a chunk that is neither bytes nor text; RangeError past the
 * limit; what the stream fails with.
 */
export function readStreamBody(spec: unknown): Promise<Bag> | undefined {
  if (!isBag(spec) || !isStreamBody(spec.body)) return undefined;
  const stream = spec.body;
  return (async () => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of stream) {
      const piece = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : asBytes(chunk);
      if (!piece) throw new TypeError("respond: a stream body must give bytes or text");
      bytes += piece.length;
      if (bytes > RESPONSE_MAX_BODY_BYTES) {
        throw new RangeError(`respond: the stream body is over the limit of ${RESPONSE_MAX_BODY_BYTES} bytes`);
      }
      chunks.push(piece);
    }
    return { ...spec, body: Buffer.concat(chunks) };
  })();
}

/**
 * Gives a respond's answer: at once for a body in hand, or once a stream body is read
 * ({@link readStreamBody}), if `open()` still allows it then. `state.responding` is set while the
 * stream is read, so that callers can ignore later calls (the first call wins). Answers the
 * promise the code awaits for a stream body, undefined otherwise.
 *
 * @throws what {@link normalizeResponse} throws for a body in hand (the promise: for a stream's).
 */
export function answerRespond(
  spec: unknown,
  state: { responding: boolean },
  open: () => boolean,
  answer: (response: HttpResponseSpec) => void,
): Promise<void> | undefined {
  const streamed = readStreamBody(spec);
  if (!streamed) {
    answer(normalizeResponse(spec));
    return undefined;
  }
  state.responding = true;
  return streamed
    .finally(() => {
      state.responding = false;
    })
    .then((read) => {
      if (open()) answer(normalizeResponse(read));
    });
}

function asBytes(body: unknown): Buffer | undefined {
  if (Buffer.isBuffer(body)) return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  return undefined;
}
