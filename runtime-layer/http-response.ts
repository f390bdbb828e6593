/**
 * The normal form of `this.<http>.respond({status, headers, body})` (component-model.md "Interface
 * props", real-behaviour.md §1.2). Used inside the runtime on what the code passed, and again by
 * trusted code on what a runtime sent, since a component can send anything over its channel.
 */
import type { HttpResponseSpec } from "./protocol.ts";

export const STATUS_MESSAGE = "status must be an integer from 100 to 599";

type Bag = Record<string, unknown>;

const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Validates and normalises a response: `status` may be a numeric string ("200" from a string prop,
 * as registry components pass it); header values become strings (arrays joined with `, `); a
 * string body stays as is, bytes (Buffer, Uint8Array, ArrayBuffer) become base64 with
 * `bodyEncoding: "base64"`, anything else becomes JSON with `content-type: application/json`
 * unless the code set a content type.
 *
 * @throws Error {@link STATUS_MESSAGE} for a missing or out-of-range status; TypeError when the
 * argument is not an object or the body cannot be serialised.
 */
export function normalizeResponse(spec: unknown): HttpResponseSpec {
  if (!isBag(spec)) throw new TypeError("respond expects an object: { status, headers, body }");
  const status = typeof spec.status === "string" && /^\s*\d+\s*$/.test(spec.status) ? Number(spec.status) : spec.status;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 100 || status > 599) {
    throw new Error(STATUS_MESSAGE);
  }
  const headers = normalizeHeaders(spec.headers);
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

function normalizeHeaders(headers: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isBag(headers)) return out;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || value === null) continue;
    out[name] = Array.isArray(value) ? value.map(String).join(", ") : String(value);
  }
  return out;
}

function asBytes(body: unknown): Buffer | undefined {
  if (Buffer.isBuffer(body)) return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  return undefined;
}
