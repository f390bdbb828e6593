/**
 * The background refresh of OAuth accounts (docs/accounts.md "Refresh"): every few minutes, the
 * healthy accounts whose access token expires within {@link REFRESH_AHEAD_MS} are renewed, so a
 * token is fresh before any use asks, and a grant revoked while the account sat idle shows as
 * `healthy: false`, and on the `$errors` of the sources using it, before the next run fails on
 * it. The renewal is the one a use makes
 * (`currentCredentials`): the same single flight per account, the same version-conditional write,
 * the same marking of a refusal. Local mode runs it on a timer; AWS as a scheduled function.
 *
 * Pure: the store, the key, the clock and the provider's HTTP come through `deps`.
 */
import { type CredentialDeps, currentCredentials } from "./account-credentials.ts";
import { type NoticeDeps, noteRefusedAccount } from "./account-refusal-notice.ts";
import { isDomainError } from "./errors.ts";
import type { AppAccountRecord } from "./ports/app-account-store.ts";

/**
 * Tokens expiring within this are renewed by the sweep (the sweeps run every 1 to 5 minutes), or
 * within half their lifetime when that is shorter: a provider's 5-minute tokens are renewed after
 * 2.5 minutes, not at every sweep.
 */
export const REFRESH_AHEAD_MS = 10 * 60_000;

/** Accounts one sweep renews, at most (the soonest expiring first); the next sweep goes on. */
export const REFRESH_SWEEP_LIMIT = 100;

export interface RefreshSweepOutcome {
  /** Accounts whose token expires within the window (of at most `limit` listed). */
  due: number;
  /** Of those, renewed: a new expiry stored. */
  renewed: number;
  /** Of those, failed: refused (now unhealthy) or the provider not reachable (tried next sweep). */
  failed: number;
}

/**
 * Renews the tokens of the healthy accounts that expire within `aheadMs`, one account at a time
 * (a sweep is background work: it never competes with itself for a provider).
 */
export async function refreshExpiringAccounts(
  deps: CredentialDeps & NoticeDeps,
  { aheadMs = REFRESH_AHEAD_MS, limit = REFRESH_SWEEP_LIMIT } = {},
): Promise<RefreshSweepOutcome> {
  const now = deps.clock.nowMs();
  // The token's lifetime as last stored: `updatedAt` is when it was written (a rename since only
  // shortens the estimate, so renews sooner).
  const windowOf = (account: AppAccountRecord) =>
    Math.min(aheadMs, ((account.expiresAt ?? now) - account.updatedAt) / 2);
  const listed = await deps.appAccounts.listExpiring(now + aheadMs, limit);
  const due = listed.filter((account) => (account.expiresAt ?? now) - now < windowOf(account));
  const outcome: RefreshSweepOutcome = { due: due.length, renewed: 0, failed: 0 };
  for (const account of due) {
    try {
      // Fresh for the window: a token expiring within it is renewed now.
      await currentCredentials(deps, account, windowOf(account));
    } catch (error) {
      // Already logged (without secrets). A refusal (`unprocessable`) is marked on the account
      // and noted on its sources' `$errors`; a provider out of reach is tried at the next sweep.
      outcome.failed++;
      if (isDomainError(error) && error.code === "unprocessable") {
        await noteRefusedAccount(deps, account, error.message).catch((failure: unknown) =>
          deps.log.error("a refused account could not be noted on its sources", {
            account_id: account.id,
            error: String(failure),
          }),
        );
      }
      continue;
    }
    const stored = await deps.appAccounts.get(account.id);
    if (stored?.expiresAt !== account.expiresAt) outcome.renewed++;
  }
  if (outcome.due > 0) deps.log.info("accounts' tokens renewed ahead of expiry", { ...outcome });
  return outcome;
}
