/**
 * Whether an account works (`healthy`): the app's `test_request` with the account's credentials
 * substituted for `{{$auth.<field>}}`, run on demand (`POST /v1/accounts/{id}/test`) and after
 * each OAuth refresh. A 2xx answer is healthy; anything else is not, with a reason that names the
 * status or the failure and never a substituted value (the request carries the token).
 *
 * Pure: the request goes through `deps.providers`.
 */
import type { Json } from "#runtime/protocol";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";

/** Time limit of one test request. */
export const TEST_REQUEST_TIMEOUT_MS = 10_000;
/** Bytes of a test request's answer read at most (a user profile; the status is what counts). */
export const MAX_TEST_ANSWER_BYTES = 1024 * 1024;

export interface HealthCheck {
  healthy: boolean;
  /** Why not, free of secrets; absent when healthy. */
  lastError?: string;
  /** The answer's JSON object when it was one (the `oauth_uid` may come from it). */
  answer?: Record<string, Json>;
}

/** An account's credentials (`AccountCredentials`, restated: account-credentials.ts imports this module). */
type AccountCredentials = Record<string, Json>;

const PLACEHOLDER = /\{\{\s*\$auth\.([A-Za-z0-9_]+)\s*\}\}/g;

/** `template` with each `{{$auth.<field>}}` replaced by `encode` of the field's value ("" when absent). */
function substitute(template: string, credentials: AccountCredentials, encode: (value: string) => string): string {
  return template.replace(PLACEHOLDER, (_whole, field: string) => {
    const value = credentials[field];
    return value === undefined || value === null
      ? ""
      : encode(typeof value === "string" ? value : JSON.stringify(value));
  });
}

/**
 * Runs the app's test request with `credentials`. An app without one is taken as healthy: there
 * is nothing to tell it by.
 */
export async function runTestRequest(
  deps: Pick<Deps, "providers">,
  app: AppDefinition,
  credentials: AccountCredentials,
): Promise<HealthCheck> {
  const test = app.testRequest;
  if (test === undefined) return { healthy: true };
  // In the URL a value is one component (a token with `/` or `&` stays whole); headers take it raw.
  const url = substitute(test.url, credentials, encodeURIComponent);
  const headers = Object.fromEntries(
    Object.entries(test.headers).map(([name, value]) => [name, substitute(value, credentials, (raw) => raw)]),
  );
  const answer = await deps.providers.request({
    method: test.method,
    url,
    headers,
    ...(test.method === "POST" ? { body: "" } : {}),
    timeoutMs: TEST_REQUEST_TIMEOUT_MS,
    maxResponseBytes: MAX_TEST_ANSWER_BYTES,
  });
  if ("error" in answer) return { healthy: false, lastError: `the test request failed: ${answer.error}` };
  if (answer.status < 200 || answer.status >= 300) {
    return { healthy: false, lastError: `the test request answered ${answer.status}` };
  }
  const check: HealthCheck = { healthy: true };
  try {
    const value = JSON.parse(answer.body) as unknown;
    if (typeof value === "object" && value !== null && !Array.isArray(value))
      check.answer = value as Record<string, Json>;
  } catch {
    // Not JSON: healthy all the same.
  }
  return check;
}
