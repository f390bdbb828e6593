/**
 * The account refresher (docs/accounts.md "Refresh"): run by an EventBridge schedule every 5
 * minutes, it renews the OAuth access tokens that expire within the next ten (`refreshExpiringAccounts`
 * of `#core/account-refresh-sweep`). Idempotent: a run cut short, or two at once, leave what the
 * next run finishes; a refresh is conditional on the account's version, as a use's is.
 */
import { refreshExpiringAccounts } from "#core/account-refresh-sweep";
import type { Deps } from "#core/ports/deps";
import { awsDepsLoader } from "./internal-handler.ts";

/** The refresher's entry with its dependencies given (tests); {@link handler} builds the AWS ones. */
export const createAccountRefresherHandler =
  (
    loadDeps: () => Promise<Deps> = awsDepsLoader({
      // The accounts, the key their credentials are sealed with (opened, sealed again), and the
      // bus a refusal's notice on the sources' `$errors` is published on.
      bus: () => import("#adapters/aws/parts/bus"),
      secrets: () => import("#adapters/aws/parts/secrets"),
      tables: () => import("#adapters/aws/parts/tables"),
    }),
  ) =>
  async (): Promise<void> => {
    await refreshExpiringAccounts(await loadDeps());
  };

export const handler = createAccountRefresherHandler();
