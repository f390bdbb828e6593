/**
 * `this.<prop>` of an `http_request` prop: its configured value plus `execute()`, which performs
 * the request and resolves to `{status, headers, data}` (component-model.md "HTTP request prop").
 *
 * The value is in the form `@pipedream/types` declares (`DefaultHttpRequestPropConfig`): `url`,
 * `method`, `headers` and `params` as lists of `{name, value}`, `auth` as `{type: "basic" |
 * "bearer" | "none", username, password, token}`, `body` as `{type | mode: "raw" | "fields",
 * contentType, raw, fields}`. Plain objects are taken for `headers` and `params` too.
 *
 * The request is made from the runtime, as the component's own HTTP is, with the address guard of
 * Sluice's other outbound requests: where private addresses are not allowed (AWS, or local mode
 * with `SLUICE_WEBHOOK_ALLOW_PRIVATE=false`), a host that is or resolves to a loopback, private or
 * link-local address is refused, and the connection goes to the address that was checked. Code in
 * the same process can still open connections itself: this keeps `execute()` to the server's
 * rule, it is not a wall around the sandbox.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { FORBIDDEN_ADDRESS, guardedLookup, isForbiddenAddress } from "./address-guard.ts";

type Bag = Record<string, unknown>;

/** What `execute()` resolves to. */
export interface HttpRequestResponse {
  status: number;
  headers: Record<string, string | string[]>;
  /** The body parsed as JSON when the answer says it is JSON, otherwise its text ("" when empty). */
  data: unknown;
}

export interface HttpRequestOptions {
  /** Whether the request may reach loopback and private addresses (local mode's default). */
  readonly allowPrivateAddresses: boolean;
  /** Time limit of the whole exchange, redirects included. @default 30000 */
  readonly timeoutMs?: number;
}

/** Largest response body `execute()` reads; past it the request fails. */
export const HTTP_REQUEST_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
/** Redirects followed, as axios does by default; each hop is checked by the guard again. */
const MAX_REDIRECTS = 5;
const DEFAULT_TIMEOUT_MS = 30_000;
const METHOD = /^[A-Z]{1,20}$/;

const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

/** `[name, value]` pairs of a `{name, value}` list or a plain object; empty names are skipped. */
function pairs(value: unknown): [string, string][] {
  const entries: [unknown, unknown][] = Array.isArray(value)
    ? value.filter(isBag).map((field) => [field.name, field.value])
    : isBag(value)
      ? Object.entries(value)
      : [];
  return entries
    .filter(([name, item]) => typeof name === "string" && name !== "" && item !== undefined && item !== null)
    .map(([name, item]) => [name as string, typeof item === "string" ? item : JSON.stringify(item)]);
}

/** A request ready to send, from a configured value. @throws TypeError naming what is wrong. */
export function httpRequestOf(config: Bag): {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
} {
  if (typeof config.url !== "string" || config.url === "") {
    throw new TypeError("execute(): the http_request prop has no url");
  }
  let url: URL;
  try {
    url = new URL(config.url);
  } catch {
    throw new TypeError(`execute(): ${JSON.stringify(config.url.slice(0, 200))} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`execute(): only http and https URLs are requested, not ${url.protocol}`);
  }
  const method = (typeof config.method === "string" && config.method !== "" ? config.method : "GET").toUpperCase();
  if (!METHOD.test(method)) throw new TypeError(`execute(): ${JSON.stringify(method)} is not an HTTP method`);
  for (const [name, value] of pairs(config.params)) url.searchParams.append(name, value);

  const headers: Record<string, string> = {};
  for (const [name, value] of pairs(config.headers)) headers[name.toLowerCase()] = value;
  const auth = isBag(config.auth) ? config.auth : {};
  if (auth.type === "basic") {
    const user = `${String(auth.username ?? "")}:${String(auth.password ?? "")}`;
    headers.authorization = `Basic ${Buffer.from(user).toString("base64")}`;
  } else if (auth.type === "bearer" && typeof auth.token === "string") {
    headers.authorization = `Bearer ${auth.token}`;
  }

  const request: { url: URL; method: string; headers: Record<string, string>; body?: Buffer } = {
    url,
    method,
    headers,
  };
  const body = isBag(config.body) ? config.body : undefined;
  if (body && method !== "GET" && method !== "HEAD") {
    const mode = body.mode ?? body.type;
    const contentType = typeof body.contentType === "string" && body.contentType !== "" ? body.contentType : undefined;
    if (mode === "raw" && typeof body.raw === "string") {
      request.body = Buffer.from(body.raw);
      headers["content-type"] ??= contentType ?? "text/plain";
    } else if (mode === "fields" || Array.isArray(body.fields)) {
      const fields = pairs(body.fields);
      if (contentType?.includes("x-www-form-urlencoded")) {
        request.body = Buffer.from(new URLSearchParams(fields).toString());
      } else {
        request.body = Buffer.from(JSON.stringify(Object.fromEntries(fields)));
      }
      headers["content-type"] ??= contentType ?? "application/json";
    }
  }
  return request;
}

/** The `this.<prop>` of an http_request prop configured as `value`. */
export function httpRequestValue(value: unknown, options: HttpRequestOptions): Bag {
  const config: Bag = isBag(value) ? { ...value } : {};
  return {
    ...config,
    execute: () => executeHttpRequest(config, options),
  };
}

/**
 * Performs the configured request. Resolves to `{status, headers, data}` for a 2xx answer; any
 * other answer rejects, as axios does, with `Request failed with status code N` and the answer on
 * the error's `response`.
 */
export async function executeHttpRequest(config: Bag, options: HttpRequestOptions): Promise<HttpRequestResponse> {
  const request = httpRequestOf(config);
  const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  let { url, method, body } = request;
  for (let hop = 0; ; hop += 1) {
    const response = await exchange(url, method, request.headers, body, options, deadline);
    const location = response.headers.location;
    if (response.status >= 300 && response.status < 400 && typeof location === "string") {
      if (hop >= MAX_REDIRECTS) throw new Error(`execute(): more than ${MAX_REDIRECTS} redirects`);
      url = new URL(location, url);
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new Error(`execute(): a redirect to ${url.protocol} is not followed`);
      }
      // 303, and 301/302 after a POST, become a GET without a body (as browsers and axios do).
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
        method = "GET";
        body = undefined;
      }
      continue;
    }
    if (response.status < 200 || response.status >= 300) {
      throw Object.assign(new Error(`Request failed with status code ${response.status}`), {
        name: "HttpRequestError",
        status: response.status,
        response,
      });
    }
    return response;
  }
}

function exchange(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  options: HttpRequestOptions,
  deadline: number,
): Promise<HttpRequestResponse> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!options.allowPrivateAddresses && isIP(host) && isForbiddenAddress(host)) {
    return Promise.reject(refused(`${host} is a private address`));
  }
  const requestOptions: RequestOptions = {
    method,
    headers: body ? { ...headers, "content-length": String(body.length) } : { ...headers },
  };
  if (!options.allowPrivateAddresses) requestOptions.lookup = guardedLookup as RequestOptions["lookup"];
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => request.destroy(new Error(`execute(): no answer within the time limit`)),
      Math.max(0, deadline - Date.now()),
    );
    const fail = (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(error.code === FORBIDDEN_ADDRESS ? refused(error.message) : error);
    };
    const request = send(url, requestOptions, (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > HTTP_REQUEST_MAX_RESPONSE_BYTES) {
          response.destroy(new Error(`execute(): the answer is over ${HTTP_REQUEST_MAX_RESPONSE_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on("error", fail);
      response.on("end", () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({
          status: response.statusCode ?? 0,
          headers: { ...response.headers } as Record<string, string | string[]>,
          data: parseBody(text, response.headers["content-type"]),
        });
      });
    });
    request.on("error", fail);
    request.end(body);
  });
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (text === "" || !contentType?.toLowerCase().includes("json")) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function refused(reason: string): Error {
  return Object.assign(new Error(`execute(): the request was refused: ${reason}`), {
    name: "ForbiddenAddressError",
    code: FORBIDDEN_ADDRESS,
  });
}
