import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in OAuth 2.0 provider on 127.0.0.1, as the tests of connected accounts need one:
 *
 * - `GET /authorize` approves at once (no login page): it checks the client id, the PKCE method
 *   (S256 only) and the redirect URI's presence, then redirects to `redirect_uri?code&state`;
 *   with `denyNext()` it redirects with `error=access_denied` instead.
 * - `POST /token` (form-encoded, client id and secret in the form): `authorization_code` (the code
 *   once only, the same redirect URI, and the verifier whose S256 is the challenge) and
 *   `refresh_token` (refused with 400 `invalid_grant` while `refuseRefreshes` is set, or for a
 *   token already used while `singleUseRefreshTokens` is). Access
 *   tokens live `tokenLifetimeSeconds`; each grant answers a new refresh token too.
 * - `GET /userinfo` with `Authorization: Bearer <access token>`: `{id, login}` for a token it
 *   issued and did not revoke, 401 otherwise (the apps' health check).
 *
 * Every token request is counted (`tokenRequests`), so a test can tell how many refreshes ran.
 */
export interface StandInOAuthProvider {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The grant type of each token request, in order. */
  readonly tokenRequests: string[];
  /** Seconds an access token lives (the `expires_in` answered). */
  tokenLifetimeSeconds: number;
  /** Refuse every refresh (a revoked grant). */
  refuseRefreshes: boolean;
  /** Answer token requests after this many milliseconds (to let concurrent callers overlap). */
  tokenDelayMs: number;
  /** A refresh token is good for one refresh (rotation with reuse detection, as many providers do). */
  singleUseRefreshTokens: boolean;
  /** The next authorize redirects with `error=access_denied`. */
  denyNext(): void;
  /** The access tokens issued so far, oldest first. */
  readonly accessTokens: string[];
  /** `/userinfo` answers 401 to this token from now on. */
  revoke(accessToken: string): void;
  /** An entry of an apps file (docs/accounts.md "Apps") for an OAuth app of this provider. */
  appEntry(nameSlug: string, options?: { configured?: boolean }): Record<string, unknown>;
  close(): Promise<void>;
}

/** The user every token of the stand-in belongs to. */
export const STAND_IN_USER = { id: "user-42", login: "ada" };

interface CodeGrant {
  clientId: string;
  redirectUri: string;
  challenge: string;
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function answerJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

const base64url = (text: string) => createHash("sha256").update(text).digest("base64url");

export async function startStandInOAuthProvider(): Promise<StandInOAuthProvider> {
  const clientId = "stand-in-client";
  const clientSecret = `secret-${randomPart()}`;
  const codes = new Map<string, CodeGrant>();
  const refreshTokens = new Set<string>();
  const accessTokens: string[] = [];
  const revoked = new Set<string>();
  const tokenRequests: string[] = [];
  let deny = false;
  let serial = 0;

  const issue = (response: ServerResponse) => {
    serial += 1;
    const access = `at-${serial}-${randomPart()}`;
    const refresh = `rt-${serial}-${randomPart()}`;
    accessTokens.push(access);
    refreshTokens.add(refresh);
    answerJson(response, 200, {
      access_token: access,
      token_type: "bearer",
      expires_in: provider.tokenLifetimeSeconds,
      refresh_token: refresh,
      scope: "read",
    });
  };

  const token = async (request: IncomingMessage, response: ServerResponse) => {
    const form = new URLSearchParams(await readBody(request));
    const grantType = form.get("grant_type") ?? "";
    tokenRequests.push(grantType);
    if (provider.tokenDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, provider.tokenDelayMs));
    if (form.get("client_id") !== clientId || form.get("client_secret") !== clientSecret) {
      answerJson(response, 401, { error: "invalid_client" });
      return;
    }
    if (grantType === "authorization_code") {
      const grant = codes.get(form.get("code") ?? "");
      codes.delete(form.get("code") ?? "");
      const verifier = form.get("code_verifier") ?? "";
      if (
        grant === undefined ||
        grant.redirectUri !== form.get("redirect_uri") ||
        base64url(verifier) !== grant.challenge
      ) {
        answerJson(response, 400, { error: "invalid_grant" });
        return;
      }
      issue(response);
      return;
    }
    if (grantType === "refresh_token") {
      const used = form.get("refresh_token") ?? "";
      if (provider.refuseRefreshes || !refreshTokens.has(used)) {
        answerJson(response, 400, { error: "invalid_grant", error_description: "the grant was revoked" });
        return;
      }
      if (provider.singleUseRefreshTokens) refreshTokens.delete(used);
      issue(response);
      return;
    }
    answerJson(response, 400, { error: "unsupported_grant_type" });
  };

  const authorize = (url: URL, response: ServerResponse) => {
    const query = url.searchParams;
    const redirectUri = query.get("redirect_uri");
    if (query.get("client_id") !== clientId || !redirectUri || query.get("code_challenge_method") !== "S256") {
      answerJson(response, 400, { error: "invalid_request" });
      return;
    }
    const target = new URL(redirectUri);
    target.searchParams.set("state", query.get("state") ?? "");
    if (deny) {
      deny = false;
      target.searchParams.set("error", "access_denied");
      target.searchParams.set("error_description", "The user said <no>");
    } else {
      const code = `code-${randomPart()}`;
      codes.set(code, { clientId, redirectUri, challenge: query.get("code_challenge") ?? "" });
      target.searchParams.set("code", code);
    }
    response.writeHead(302, { location: target.href }).end();
  };

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    if (request.method === "GET" && url.pathname === "/authorize") return authorize(url, response);
    if (request.method === "POST" && url.pathname === "/token") {
      token(request, response).catch(() => response.destroy());
      return;
    }
    if (request.method === "GET" && url.pathname === "/userinfo") {
      const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? "")?.[1] ?? "";
      if (!accessTokens.includes(bearer) || revoked.has(bearer))
        return answerJson(response, 401, { error: "bad token" });
      return answerJson(response, 200, STAND_IN_USER);
    }
    answerJson(response, 404, { error: "not found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider: StandInOAuthProvider = {
    origin,
    clientId,
    clientSecret,
    tokenRequests,
    tokenLifetimeSeconds: 3600,
    refuseRefreshes: false,
    tokenDelayMs: 0,
    singleUseRefreshTokens: false,
    accessTokens,
    denyNext: () => {
      deny = true;
    },
    revoke: (accessToken) => revoked.add(accessToken),
    appEntry: (nameSlug, { configured = true } = {}) => ({
      name_slug: nameSlug,
      name: "Stand-in",
      auth_type: "oauth",
      fields: [],
      oauth: {
        authorize_url: `${origin}/authorize`,
        token_url: `${origin}/token`,
        scopes: ["read"],
        ...(configured ? { client_id: clientId, client_secret: clientSecret } : {}),
      },
      test_request: {
        method: "GET",
        url: `${origin}/userinfo`,
        headers: { Authorization: "Bearer {{$auth.oauth_access_token}}" },
      },
    }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return provider;
}

const randomPart = () => randomBytes(8).toString("hex");
