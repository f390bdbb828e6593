/**
 * The OAuth 2.0 side of connected accounts (docs/accounts.md "OAuth"): the authorization URL with
 * PKCE (RFC 7636, S256), and the token endpoint's two grants, `authorization_code` and
 * `refresh_token` (RFC 6749). The provider is untrusted: its answers are bounded in time and size
 * (the `ProviderHttp` port), parsed defensively, and what Sluice repeats of a refusal is the
 * provider's error code only, never its body (which may echo a token).
 *
 * Pure: requests go through `deps.providers`.
 */
import type { Json } from "#runtime/protocol";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";
import { sha256Base64url } from "./sha256.ts";

/** Time limit of one token request. */
export const TOKEN_TIMEOUT_MS = 10_000;
/** A token answer is a few hundred bytes; anything past this is not one. */
export const MAX_TOKEN_ANSWER_BYTES = 64 * 1024;

export type OAuthSettings = NonNullable<AppDefinition["oauth"]>;

/** The PKCE S256 challenge of a code verifier. */
export const codeChallenge = (verifier: string) => sha256Base64url(verifier);

/** The provider's authorization URL for one connect (the URL's own query parameters are kept). */
export function authorizeUrl(
  oauth: OAuthSettings,
  request: { state: string; verifier: string; redirectUri: string },
): string {
  const url = new URL(oauth.authorizeUrl);
  const params: Record<string, string> = {
    response_type: "code",
    client_id: oauth.clientId,
    redirect_uri: request.redirectUri,
    state: request.state,
    code_challenge: codeChallenge(request.verifier),
    code_challenge_method: "S256",
  };
  if (oauth.scopes.length > 0) params.scope = oauth.scopes.join(" ");
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.href;
}

/** What a token endpoint granted. */
export interface TokenSet {
  accessToken: string;
  refreshToken?: string;
  /** Seconds the access token lives, when the provider says. */
  expiresIn?: number;
  /** The whole answer, for the `oauth_uid` and the app's extra fields. */
  answer: Record<string, Json>;
}

/**
 * A token request's outcome: granted, or why not. `refused` is the provider's answer (a 4xx, or
 * an `error` field, as GitHub answers with 200): retrying will not help. Otherwise the failure
 * is transient (no answer, a 5xx, garbage).
 */
export type TokenOutcome =
  | { granted: TokenSet }
  | { refused: true; reason: string }
  | { refused: false; reason: string };

export type TokenGrant =
  | { grant_type: "authorization_code"; code: string; code_verifier: string; redirect_uri: string }
  | { grant_type: "refresh_token"; refresh_token: string };

/** A code the provider sent that is safe to repeat: short, of token characters. */
function errorCode(value: unknown): string {
  if (value === undefined) return "no error code";
  return typeof value === "string" && /^[A-Za-z0-9_.:-]{1,64}$/.test(value) ? value : "unrecognised error code";
}

/** A token answer as an object: JSON, or form-encoded as some providers answer. */
function parseAnswer(body: string): Record<string, Json> | undefined {
  try {
    const value = JSON.parse(body) as unknown;
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, Json>;
    return undefined;
  } catch {
    const form = new URLSearchParams(body);
    return form.has("access_token") || form.has("error") ? Object.fromEntries(form) : undefined;
  }
}

/** Longest `expires_in` taken as given: past it, a token is as good as one that never expires. */
const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 86_400;

/** Whole seconds, at most ten years: a hostile answer's `1e300` or `0.5` stays a sane epoch. */
function expiresInOf(value: Json | undefined): number | undefined {
  const seconds = typeof value === "string" ? Number(value) : value;
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 1) return undefined;
  return Math.min(Math.floor(seconds), MAX_EXPIRES_IN_SECONDS);
}

/**
 * Asks the app's token endpoint for tokens, with the app's client id and secret in the form
 * (`client_secret_post`, which every provider of the catalog takes).
 */
export async function requestTokens(
  deps: Pick<Deps, "providers">,
  oauth: OAuthSettings,
  grant: TokenGrant,
): Promise<TokenOutcome> {
  const form = new URLSearchParams({ ...grant, client_id: oauth.clientId, client_secret: oauth.clientSecret });
  const answer = await deps.providers.request({
    method: "POST",
    url: oauth.tokenUrl,
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: form.toString(),
    timeoutMs: TOKEN_TIMEOUT_MS,
    maxResponseBytes: MAX_TOKEN_ANSWER_BYTES,
  });
  if ("error" in answer) return { refused: false, reason: `the token endpoint could not be reached: ${answer.error}` };
  const parsed = parseAnswer(answer.body);
  if (answer.status >= 400 && answer.status < 500) {
    return { refused: true, reason: `the token endpoint answered ${answer.status} (${errorCode(parsed?.error)})` };
  }
  if (answer.status < 200 || answer.status >= 300) {
    return { refused: false, reason: `the token endpoint answered ${answer.status}` };
  }
  if (parsed?.error !== undefined) {
    return { refused: true, reason: `the token endpoint refused (${errorCode(parsed.error)})` };
  }
  const accessToken = parsed?.access_token;
  if (typeof accessToken !== "string" || accessToken === "" || accessToken.length > 8192) {
    return { refused: false, reason: "the token endpoint's answer holds no access_token" };
  }
  const granted: TokenSet = { accessToken, answer: parsed as Record<string, Json> };
  const refreshToken = parsed?.refresh_token;
  if (typeof refreshToken === "string" && refreshToken !== "" && refreshToken.length <= 8192) {
    granted.refreshToken = refreshToken;
  }
  const expiresIn = expiresInOf(parsed?.expires_in);
  if (expiresIn !== undefined) granted.expiresIn = expiresIn;
  return { granted };
}

/** The fields of an answer that name the user: the token answer's, else the test request's. */
const UID_FIELDS = ["user_id", "uid", "sub", "id", "login", "email"] as const;

/** The provider's id of the user (`oauth_uid`) in an answer, as a string; undefined when none. */
export function uidOf(answer: Record<string, Json> | undefined): string | undefined {
  for (const field of UID_FIELDS) {
    const value = answer?.[field];
    if ((typeof value === "string" && value !== "") || typeof value === "number") return String(value).slice(0, 512);
  }
  return undefined;
}
