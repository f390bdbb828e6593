/**
 * The API's answers, in the shape API Gateway expects from a Lambda proxy integration: JSON
 * results and the error shape every endpoint answers in. Used by the route pipeline
 * (`pipeline.ts`), local mode's server and stream server, and the AWS endpoint and stream
 * functions, so that every answer of either platform looks the same.
 */
import { clipText } from "#core/clip-text";
import { type FieldIssue, isDomainError } from "#core/errors";
import type { Logger } from "#core/ports/logger";
import { STATUS_OF } from "./error-status.ts";

export interface HttpResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" } as const;

/** A JSON response in the shape API Gateway expects from a Lambda proxy integration. */
export function jsonResult(statusCode: number, body: unknown, headers: Record<string, string> = {}): HttpResult {
  return { statusCode, headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(body) };
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` safe in HTML text and attribute values. */
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (character) => HTML_ESCAPES[character] ?? "");

/**
 * A small HTML page of a title and a message (plain text, escaped), for a browser: no script,
 * nothing loaded from elsewhere (CSP), no referrer (the page's URL may carry a one-time code),
 * never cached.
 */
export function htmlResult(statusCode: number, title: string, message: string): HttpResult {
  const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} - Sluice</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></body></html>
`;
  return {
    statusCode,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store",
    },
    body,
  };
}

/**
 * Longest message of an error answer. Messages can quote the input (a component's code that
 * does not build names the offending identifier, which may be a megabyte long); past this they
 * are cut, so a bad request never gets an answer larger than itself.
 */
export const MAX_ERROR_MESSAGE_CHARS = 1000;

function clip(message: string): string {
  return clipText(message, MAX_ERROR_MESSAGE_CHARS);
}

/**
 * Turns an error into the response a client sees: 4xx messages as they are (cut past
 * {@link MAX_ERROR_MESSAGE_CHARS}), anything else a bare 500; always with `x-request-id`, and with
 * a Bearer challenge on 401.
 */
export function errorResult(error: unknown, requestId: string, log: Logger | undefined): HttpResult {
  let result: HttpResult;
  if (isDomainError(error) && error.code !== "internal") {
    const body: { error: string; details?: FieldIssue[] } = { error: clip(error.message) };
    if (error.issues?.length) {
      body.details = error.issues.map((issue) => ({ field: clip(issue.field), message: clip(issue.message) }));
    }
    result = jsonResult(STATUS_OF[error.code], body);
    if (error.code === "unauthorized") result.headers["www-authenticate"] = 'Bearer realm="sluice"';
  } else {
    const { message, stack } = error instanceof Error ? error : { message: String(error), stack: undefined };
    log?.error("unhandled error", { error: message, stack });
    result = jsonResult(500, { error: "internal server error", request_id: requestId });
  }
  result.headers["x-request-id"] = requestId;
  return result;
}
