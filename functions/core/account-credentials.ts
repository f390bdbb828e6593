/**
 * The credentials (`$auth`) of a connected account at the time of a use: a run, a hook, an
 * `options` or `additionalProps` call, or a read with `include_credentials=1`.
 *
 * OAuth accounts whose access token expires too soon are refreshed first (docs/accounts.md
 * "Refresh"): with the refresh token at the app's token endpoint, one refresh at a time per
 * account in a process (a single flight), and across processes through the store's
 * version-conditional update (the loser reads and uses the winner's token). A refresh the provider
 * refuses marks the account unhealthy and fails the use with a message saying so.
 *
 * Pure: the store, the key, the clock and the provider's HTTP come through `deps`.
 */
import type { Json } from "#runtime/protocol";
import { runTestRequest } from "./account-health.ts";
import { DomainError, notFound } from "./errors.ts";
import { requestTokens, type TokenSet } from "./oauth-tokens.ts";
import type { AppAccountRecord, AppAccountStore } from "./ports/app-account-store.ts";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";

export type AccountCredentials = Record<string, Json>;

export type CredentialDeps = Pick<Deps, "secrets" | "appAccounts" | "apps" | "providers" | "clock" | "log">;

/**
 * A token is refreshed when it expires within the use's time plus this: the clocks of Sluice and
 * the provider differ a little, and the request using the token takes a moment to arrive.
 */
export const REFRESH_MARGIN_MS = 60_000;

/**
 * The account's current credentials, valid for at least `freshForMs` from now where the app can
 * renew them (OAuth: refreshed first when the access token expires sooner).
 * @throws DomainError `unprocessable` when the provider refuses the refresh (the account is then
 * unhealthy), `unavailable` when it cannot be reached and the token has already expired.
 */
export async function currentCredentials(
  deps: CredentialDeps,
  account: AppAccountRecord,
  freshForMs: number,
): Promise<AccountCredentials> {
  if (!needsRefresh(deps, account, freshForMs)) return openCredentials(deps, account.sealedCredentials);
  const refreshed = await singleFlight(deps.appAccounts, account.id, () => refresh(deps, account.id, freshForMs));
  return openCredentials(deps, refreshed.sealedCredentials);
}

function needsRefresh(deps: Pick<Deps, "clock">, account: AppAccountRecord, freshForMs: number): boolean {
  return account.expiresAt !== undefined && account.expiresAt - deps.clock.nowMs() < freshForMs + REFRESH_MARGIN_MS;
}

/** Refreshes in flight, per store (each composition has its own) and account id. */
const inFlight = new WeakMap<AppAccountStore, Map<string, Promise<AppAccountRecord>>>();

/** `work` once per account at a time: a second caller meanwhile shares the first one's outcome. */
function singleFlight(
  store: AppAccountStore,
  id: string,
  work: () => Promise<AppAccountRecord>,
): Promise<AppAccountRecord> {
  let flights = inFlight.get(store);
  if (flights === undefined) {
    flights = new Map();
    inFlight.set(store, flights);
  }
  const running = flights.get(id);
  if (running !== undefined) return running;
  const flight = work().finally(() => flights.delete(id));
  flights.set(id, flight);
  return flight;
}

/** The account as stored now, refreshed when still needed: what every caller of a flight gets. */
async function refresh(deps: CredentialDeps, id: string, freshForMs: number): Promise<AppAccountRecord> {
  // Read again: another flight (or process) may have refreshed since the caller read it.
  const account = await deps.appAccounts.get(id);
  if (account === undefined) throw notFound("account");
  if (!needsRefresh(deps, account, freshForMs)) return account;
  const app = deps.apps.find(account.app);
  const credentials = await openCredentials(deps, account.sealedCredentials);
  const refreshToken = credentials.oauth_refresh_token;
  if (app?.oauth === undefined || typeof refreshToken !== "string" || refreshToken === "") {
    // Nothing to renew it with: the token serves as long as it lives.
    if ((account.expiresAt ?? 0) > deps.clock.nowMs()) return account;
    return refused(deps, account, "its access token expired and it has no refresh token to renew it with");
  }
  const outcome = await requestTokens(deps, app.oauth, { grant_type: "refresh_token", refresh_token: refreshToken });
  if ("granted" in outcome) return store(deps, account, app, credentials, outcome.granted);
  if (outcome.refused) {
    return refused(deps, account, `the provider refused to refresh its token: ${outcome.reason}`);
  }
  deps.log.warn("an account's token could not be refreshed", { account_id: id, reason: outcome.reason });
  // A provider down for a moment: the token in hand serves while it has not expired.
  if ((account.expiresAt ?? 0) > deps.clock.nowMs()) return account;
  throw new DomainError("unavailable", `account ${id}: its access token expired and ${outcome.reason}`);
}

/** How many times refreshed tokens are written again over a record another writer changed meanwhile. */
const WRITE_ATTEMPTS = 3;

/**
 * Writes the refreshed tokens (and the test request's verdict). When another writer changed the
 * account meanwhile: its record is used when it holds a fresh token (another refresh won);
 * otherwise (a rename, or a racing process whose refresh the provider refused and which marked it
 * unhealthy) these tokens, the newest the provider gave, are written over it.
 */
async function store(
  deps: CredentialDeps,
  account: AppAccountRecord,
  app: AppDefinition,
  credentials: AccountCredentials,
  tokens: TokenSet,
): Promise<AppAccountRecord> {
  const now = deps.clock.nowMs();
  const renewed: AccountCredentials = { ...credentials, oauth_access_token: tokens.accessToken };
  // A provider that rotates refresh tokens sends a new one; one that does not keeps the old valid.
  if (tokens.refreshToken !== undefined) renewed.oauth_refresh_token = tokens.refreshToken;
  const sealed = await sealCredentials(deps, renewed);
  const health = await runTestRequest(deps, app, renewed);
  let base = account;
  for (let attempt = 1; ; attempt++) {
    const { expiresAt: _expired, lastError: _error, ...rest } = base;
    const next: AppAccountRecord = {
      ...rest,
      sealedCredentials: sealed,
      healthy: health.healthy,
      updatedAt: now,
      version: base.version + 1,
    };
    if (tokens.expiresIn !== undefined) next.expiresAt = now + tokens.expiresIn * 1000;
    if (health.lastError !== undefined) next.lastError = health.lastError;
    if (await deps.appAccounts.update(next, base.version)) return next;
    const latest = await deps.appAccounts.get(account.id);
    if (latest === undefined) throw notFound("account");
    if (renewedSince(account, latest) || attempt >= WRITE_ATTEMPTS) return latest;
    base = latest;
  }
}

/**
 * Whether `latest` holds credentials renewed since `account` was read. A rename, or a refusal
 * marked by a racing process, leaves them as they were (the same sealed text).
 */
function renewedSince(account: AppAccountRecord, latest: AppAccountRecord): boolean {
  return latest.version > account.version && latest.sealedCredentials !== account.sealedCredentials;
}

/** The account as stored now when another process refreshed it since `account` was read. */
async function refreshedMeanwhile(
  deps: CredentialDeps,
  account: AppAccountRecord,
): Promise<AppAccountRecord | undefined> {
  const latest = await deps.appAccounts.get(account.id);
  return latest !== undefined && renewedSince(account, latest) ? latest : undefined;
}

/**
 * Marks the account unhealthy with `reason` and fails the use with it, unless another process
 * refreshed it meanwhile (then its record is the answer). Should this mark land before the
 * winner's tokens do, the winner writes them over it ({@link store}).
 */
async function refused(deps: CredentialDeps, account: AppAccountRecord, reason: string): Promise<AppAccountRecord> {
  // A provider that rotates refresh tokens refuses the one a racing process just used.
  const meanwhile = await refreshedMeanwhile(deps, account);
  if (meanwhile !== undefined) return meanwhile;
  const next: AppAccountRecord = {
    ...account,
    healthy: false,
    lastError: reason,
    updatedAt: deps.clock.nowMs(),
    version: account.version + 1,
  };
  if (!(await deps.appAccounts.update(next, account.version))) {
    const latest = await refreshedMeanwhile(deps, account);
    if (latest !== undefined) return latest;
  }
  deps.log.warn("an account's token refresh was refused", { account_id: account.id, reason });
  throw new DomainError(
    "unprocessable",
    `account ${account.id} (${account.app}) needs to be connected again: ${reason}`,
  );
}

/** The credentials sealed in `sealed`: a JSON object. */
export async function openCredentials(deps: Pick<Deps, "secrets">, sealed: string): Promise<AccountCredentials> {
  const value = JSON.parse(await deps.secrets.open(sealed)) as unknown;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error("the sealed credentials are not a JSON object");
  }
  return value as AccountCredentials;
}

/** `credentials` sealed for storage. */
export async function sealCredentials(deps: Pick<Deps, "secrets">, credentials: AccountCredentials): Promise<string> {
  return deps.secrets.seal(JSON.stringify(credentials));
}
