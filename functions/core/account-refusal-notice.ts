/**
 * A refresh the provider refused during the background refresh (`account-refresh-sweep.ts`) is
 * noted on the `$errors` of every source using the account (issue 17: "is reported on the
 * affected sources' $errors"), so that `$errors` subscribers and the sources' own error lists
 * hear of a revoked grant before a run fails on it. A refusal met by a use is reported by that
 * use's run, as any failure. Workflows using the account hear of it at their next run: a
 * workflow's `$errors` event carries a run's context, and there is no run here.
 */

import type { ErrorRecord } from "#runtime/protocol";
import { accountUsers } from "./account-users.ts";
import { ACCOUNT_ERROR } from "./app-accounts.ts";
import type { AppAccountRecord } from "./ports/app-account-store.ts";
import type { Deps } from "./ports/deps.ts";
import { errorEvent, storeAndPublish } from "./source-runs.ts";

export type NoticeDeps = Pick<Deps, "sources" | "workflows" | "events" | "bus" | "usage" | "ids" | "clock">;

/** Stores `message` as an `AccountError` on the `$errors` of each source that uses `account`; how many. */
export async function noteRefusedAccount(
  deps: NoticeDeps,
  account: AppAccountRecord,
  message: string,
): Promise<number> {
  const { sources } = await accountUsers(deps, account.workspaceId, account.id);
  const now = deps.clock.nowMs();
  const error: ErrorRecord = { name: ACCOUNT_ERROR, message, ts: now };
  let noted = 0;
  for (const { id } of sources) {
    const source = await deps.sources.getSource(id);
    if (source === undefined) continue;
    await storeAndPublish(deps, source, [errorEvent(deps, source, { kind: "run", event: undefined }, error)], now);
    noted++;
  }
  return noted;
}
