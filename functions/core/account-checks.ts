/**
 * `POST /v1/accounts/{id}/test`: the app's test request run now with the account's current
 * credentials (refreshed first when they expire), its verdict stored as `healthy` and `lastError`.
 *
 * Pure: ports come through `deps`.
 */
import { requireAppAccount } from "./access.ts";
import { type CredentialDeps, currentCredentials } from "./account-credentials.ts";
import { runTestRequest } from "./account-health.ts";
import { accountView } from "./connected-account-api.ts";
import { DomainError, notFound } from "./errors.ts";
import type { Caller } from "./identity.ts";
import type { AppAccountRecord } from "./ports/app-account-store.ts";
import type { Deps } from "./ports/deps.ts";

/** How many times a verdict is written again after another writer changed the account meanwhile. */
const WRITE_ATTEMPTS = 3;

/** Runs the account's test request and stores the verdict; answers the account's metadata. */
export async function testAccount(deps: CredentialDeps & Pick<Deps, "identity">, caller: Caller, id: string) {
  let account = await requireAppAccount(deps, caller, id);
  const app = deps.apps.find(account.app);
  if (app === undefined) throw new DomainError("conflict", `the account's app ${account.app} is not in the catalog`);
  for (let attempt = 1; ; attempt++) {
    const credentials = await currentCredentials(deps, account, 0).catch(async (error: unknown) => {
      // A refused refresh marked the account unhealthy already: that is the test's verdict.
      if (!(error instanceof DomainError && error.code === "unprocessable")) throw error;
      return undefined;
    });
    if (credentials === undefined) return accountView(deps, (await deps.appAccounts.get(id)) ?? account);
    const latest = (await deps.appAccounts.get(id)) ?? account;
    const health = await runTestRequest(deps, app, credentials);
    const { lastError: _previous, ...rest } = latest;
    const next: AppAccountRecord = {
      ...rest,
      healthy: health.healthy,
      updatedAt: deps.clock.nowMs(),
      version: latest.version + 1,
    };
    if (health.lastError !== undefined) next.lastError = health.lastError;
    if (await deps.appAccounts.update(next, latest.version)) return accountView(deps, next);
    const changed = await deps.appAccounts.get(id);
    if (changed === undefined) throw notFound("account");
    if (attempt >= WRITE_ATTEMPTS) return accountView(deps, changed);
    account = changed;
  }
}
