/**
 * Connecting an OAuth app (docs/accounts.md "OAuth"): `POST /v1/accounts/connect` starts an
 * authorization code flow with PKCE and answers the provider's URL to open in a browser; the
 * provider sends the browser back to the callback with a code and the one-time `state`, which is
 * the callback's only proof of who started it (the callback takes no API key). The callback
 * exchanges the code, runs the app's test request and creates the account.
 *
 * Pure: the store, the key, the clock, ids and the provider's HTTP come through `deps`.
 */
import type { Json } from "#runtime/protocol";
import type { AccountCredentials } from "./account-credentials.ts";
import { runTestRequest } from "./account-health.ts";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { clipText } from "./clip-text.ts";
import { accountName, createConnectedAccount, requireRoomForAccount } from "./connected-accounts.ts";
import { invalid, isDomainError } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { authorizeUrl, requestTokens, uidOf } from "./oauth-tokens.ts";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";
import { isoTime } from "./time.ts";

/** Where the provider sends the browser back: `<publicUrl>` + this (register it with the provider). */
export const OAUTH_CALLBACK_PATH = "/v1/accounts/oauth/callback";
/** How long a started connect may take, from the API call to the provider's redirect. */
export const CONNECT_TTL_MS = 10 * 60_000;

export interface StartConnectInput extends WorkspaceChoice {
  /** The app's `name_slug` or `app_` id. */
  app: string;
  name?: string | undefined;
}

/** The answer of `POST /v1/accounts/connect`. */
export interface ConnectStarted {
  /** Open it in a browser: the provider asks the user, then redirects to `redirect_uri`. */
  authorize_url: string;
  state: string;
  /** The callback URL the provider must have registered for the app's client. */
  redirect_uri: string;
  expires_at: string;
  app: { id: string; name_slug: string; name: string };
  workspace_id: string;
}

/** The callback URL of this Sluice. */
export const callbackUrl = (deps: Pick<Deps, "runtime">) =>
  `${deps.runtime.publicUrl.replace(/\/+$/, "")}${OAUTH_CALLBACK_PATH}`;

/** An OAuth app of the catalog whose client is configured; 400 naming `app` otherwise. */
function connectableApp(deps: Pick<Deps, "apps">, idOrSlug: string): AppDefinition & { oauth: object } {
  const app = deps.apps.find(idOrSlug);
  if (app === undefined) throw invalid("app", `no app ${JSON.stringify(idOrSlug)} in the catalog (GET /v1/apps)`);
  if (app.oauth === undefined) {
    throw invalid("app", `${app.nameSlug} is not an OAuth app: create its account with POST /v1/accounts`);
  }
  if (app.oauth.clientId === "" || app.oauth.clientSecret === "") {
    throw invalid(
      "app",
      `${app.nameSlug} has no OAuth client configured: set its "oauth.client_id" and "oauth.client_secret" in SLUICE_APPS_FILE (docs/accounts.md "OAuth")`,
    );
  }
  return app as AppDefinition & { oauth: object };
}

/** Starts connecting an OAuth app for the caller: the state and the sealed PKCE verifier are kept for 10 minutes. */
export async function startConnect(
  deps: Pick<Deps, "identity" | "apps" | "appAccounts" | "secrets" | "clock" | "ids" | "runtime">,
  caller: Caller,
  input: StartConnectInput,
): Promise<ConnectStarted> {
  const app = connectableApp(deps, input.app);
  accountName(input.name);
  const workspace = await workspaceOrDefault(deps, caller, input);
  // Refused before the provider is asked; the callback checks again (accounts made meanwhile).
  await requireRoomForAccount(deps, workspace.id);
  const now = deps.clock.nowMs();
  const state = deps.ids.newSecret(32);
  // 64 characters of base64url: within RFC 7636's 43 to 128 unreserved characters.
  const verifier = deps.ids.newSecret(48);
  const redirectUri = callbackUrl(deps);
  const expiresAt = now + CONNECT_TTL_MS;
  await deps.appAccounts.savePendingConnect(
    {
      state,
      workspaceId: workspace.id,
      ownerId: caller.userId,
      app: app.nameSlug,
      ...(input.name === undefined ? {} : { name: input.name }),
      sealedVerifier: await deps.secrets.seal(verifier),
      redirectUri,
      expiresAt,
    },
    now,
  );
  return {
    authorize_url: authorizeUrl(app.oauth, { state, verifier, redirectUri }),
    state,
    redirect_uri: redirectUri,
    expires_at: isoTime(expiresAt),
    app: { id: app.id, name_slug: app.nameSlug, name: app.name },
    workspace_id: workspace.id,
  };
}

/** What the provider's redirect carries, as it came (untrusted). */
export interface CallbackQuery {
  code?: string | undefined;
  state?: string | undefined;
  error?: string | undefined;
  error_description?: string | undefined;
}

/** The page the callback shows: plain text, which the HTTP layer escapes. */
export interface ConnectPage {
  status: number;
  title: string;
  message: string;
  /** The account made, on success. */
  accountId?: string;
}

const AGAIN = "Start again from Sluice (sluice accounts connect <app>, or POST /v1/accounts/connect).";

const failure = (status: number, title: string, message: string): ConnectPage => ({
  status,
  title,
  message: `${message} ${AGAIN}`,
});

/**
 * Finishes a connect: the state is used up whatever happens next (a second visit of the same
 * redirect finds nothing), the code exchanged for tokens, the test request run, the account made.
 * Every failure is a page (4xx, or 502 when the provider could not be reached) and creates nothing.
 */
export async function finishConnect(
  deps: Pick<Deps, "apps" | "appAccounts" | "secrets" | "clock" | "ids" | "providers" | "log">,
  query: CallbackQuery,
): Promise<ConnectPage> {
  if (!query.state) return failure(400, "Missing state", "The provider's redirect carries no state.");
  const pending = await deps.appAccounts.takePendingConnect(query.state, deps.clock.nowMs());
  if (pending === undefined) {
    return failure(
      400,
      "Unknown or expired authorization",
      "This authorization is unknown, was already used, or has expired (they last 10 minutes).",
    );
  }
  if (query.error !== undefined) {
    const description = query.error_description ? `: ${clipText(query.error_description, 300)}` : "";
    return failure(
      400,
      "Not authorized",
      `The provider did not authorize: ${clipText(query.error, 100)}${description}.`,
    );
  }
  if (!query.code) return failure(400, "Missing code", "The provider's redirect carries no code.");
  const app = deps.apps.find(pending.app);
  if (app?.oauth === undefined) {
    return failure(400, "Unknown app", `The app ${pending.app} is no longer an OAuth app of this Sluice.`);
  }
  try {
    await requireRoomForAccount(deps, pending.workspaceId);
  } catch (error) {
    if (!isDomainError(error) || error.code !== "conflict") throw error;
    return failure(409, "Too many accounts", `Not connected: ${error.message}.`);
  }
  const outcome = await requestTokens(deps, app.oauth, {
    grant_type: "authorization_code",
    code: query.code,
    code_verifier: await deps.secrets.open(pending.sealedVerifier),
    redirect_uri: pending.redirectUri,
  });
  if (!("granted" in outcome)) {
    deps.log.warn("an OAuth code exchange failed", { app: app.nameSlug, reason: outcome.reason });
    return failure(outcome.refused ? 400 : 502, "Not connected", `Sluice could not get a token: ${outcome.reason}.`);
  }
  const tokens = outcome.granted;
  const credentials: AccountCredentials = {
    oauth_access_token: tokens.accessToken,
    oauth_refresh_token: tokens.refreshToken ?? null,
    oauth_client_id: app.oauth.clientId,
  };
  // The app's own fields, when the token answer carries them as plain values.
  for (const field of app.fields) {
    const value: Json | undefined = tokens.answer[field];
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
      credentials[field] = value;
  }
  const health = await runTestRequest(deps, app, credentials);
  credentials.oauth_uid = uidOf(tokens.answer) ?? uidOf(health.answer) ?? null;
  const now = deps.clock.nowMs();
  const account = await createConnectedAccount(deps, {
    workspaceId: pending.workspaceId,
    ownerId: pending.ownerId,
    app,
    name: pending.name,
    credentials,
    expiresAt: tokens.expiresIn === undefined ? undefined : now + tokens.expiresIn * 1000,
    health,
  });
  const checked = health.healthy
    ? ""
    : ` Its test request failed (${health.lastError}); the account is marked unhealthy.`;
  return {
    status: 200,
    title: "Connected",
    message: `${app.name} is connected as account ${account.id} ("${account.name}").${checked} You can close this window.`,
    accountId: account.id,
  };
}
