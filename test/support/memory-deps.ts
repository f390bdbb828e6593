import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import { SqliteUsageStore } from "#adapters/local/sqlite-usage-store";
import { createAccount } from "#core/accounts";
import type { Clock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import { silentLogger } from "#ports/logger";

/** Real local adapters on a private in-memory SQLite database, with a clock the test controls. */
export function memoryDeps(startMs = Date.UTC(2026, 10, 20, 12)): Deps & { clock: Clock & { set(ms: number): void } } {
  const db = openSqlite(":memory:");
  let now = startMs;
  const clock = { nowMs: () => now, set: (ms: number) => (now = ms) };
  return {
    identity: new SqliteIdentityStore(db),
    usage: new SqliteUsageStore(db),
    clock,
    ids: randomIdGenerator(clock),
    log: silentLogger,
    quotas: { dailyInvocations: 1000, dailyComputeTimeMs: 60_000, dailyCredits: 500 },
  };
}

export async function accountIn(deps: Deps, username: string) {
  return createAccount(deps, { username, email: `${username}@example.com` });
}
