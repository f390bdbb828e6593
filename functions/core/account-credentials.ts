/**
 * The credentials (`$auth`) of a connected account at the time of a use: a run, a hook, an
 * `options` or `additionalProps` call, or a read with `include_credentials=1`.
 *
 * Pure: the store and the key come through `deps`.
 */
import type { Json } from "#runtime/protocol";
import type { AppAccountRecord } from "./ports/app-account-store.ts";
import type { Deps } from "./ports/deps.ts";

export type AccountCredentials = Record<string, Json>;

/**
 * The account's current credentials, valid for at least `freshForMs` from now where the app can
 * renew them (OAuth: refreshed first when the access token expires sooner).
 */
export async function currentCredentials(
  deps: Pick<Deps, "secrets">,
  account: AppAccountRecord,
  _freshForMs: number,
): Promise<AccountCredentials> {
  return openCredentials(deps, account.sealedCredentials);
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
