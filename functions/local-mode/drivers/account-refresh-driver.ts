/**
 * Local mode's driver of the background refresh of OAuth accounts (`refreshExpiringAccounts` of
 * `#core/account-refresh-sweep`): once a minute, tokens that expire within ten minutes are renewed
 * (docs/accounts.md "Refresh"). On AWS a scheduled function runs the same sweep every 5 minutes.
 */
import type { CredentialDeps } from "#core/account-credentials";
import { refreshExpiringAccounts } from "#core/account-refresh-sweep";
import type { NoticeDeps } from "#core/account-refusal-notice";
import { type PeriodicPass, startPeriodicPass } from "./periodic-pass.ts";

/** How often tokens about to expire are looked for in local mode. */
export const ACCOUNT_REFRESH_SWEEP_MS = 60_000;

export function startAccountRefreshDriver(
  deps: CredentialDeps & NoticeDeps,
  everyMs = ACCOUNT_REFRESH_SWEEP_MS,
): PeriodicPass {
  return startPeriodicPass(everyMs, () => refreshExpiringAccounts(deps), deps.log, "account refresh sweep failed");
}
