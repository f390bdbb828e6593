import { join } from "node:path";
import type { LocalConfig } from "#config/env";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import type { Logger } from "#ports/logger";
import { openSqlite } from "./sqlite-database.ts";
import { SqliteIdentityStore } from "./sqlite-identity-store.ts";
import { SqliteUsageStore } from "./sqlite-usage-store.ts";

export const DATABASE_FILE = "sluice.db";

/** The composition root of local mode: every port on SQLite and the local process. */
export function localDeps(config: LocalConfig, log: Logger): { deps: Deps; close(): void } {
  const db = openSqlite(join(config.dataDir, DATABASE_FILE));
  const deps: Deps = {
    identity: new SqliteIdentityStore(db),
    usage: new SqliteUsageStore(db),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log,
    quotas: config.quotas,
  };
  return { deps, close: () => db.close() };
}
