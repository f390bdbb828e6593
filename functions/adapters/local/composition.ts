import { join } from "node:path";
import { DEFAULT_REGISTRY_DIR, readRegistryComponent } from "#adapters/registry-files";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import type { LocalConfig } from "#config/env";
import { fireTimer, runSource } from "#core/source-runs";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import { randomIdGenerator } from "#ports/id-generator";
import type { Logger } from "#ports/logger";
import { InProcessRunQueue } from "./in-process-run-queue.ts";
import { LocalSecrets } from "./local-secrets.ts";
import { LocalTimers } from "./local-timers.ts";
import { npmPackagesPlugin } from "./npm-packages.ts";
import { ProcessPoolHost } from "./process-pool-host.ts";
import { SqliteComponentStore } from "./sqlite-component-store.ts";
import { openSqlite } from "./sqlite-database.ts";
import { SqliteEventStore } from "./sqlite-event-store.ts";
import { SqliteIdentityStore } from "./sqlite-identity-store.ts";
import { SqliteSourceStore } from "./sqlite-source-store.ts";
import { SqliteUsageStore } from "./sqlite-usage-store.ts";

export const DATABASE_FILE = "sluice.db";
/** Bundles of components, one folder per owner and code hash (see process-pool-host.ts). */
export const SANDBOX_DIR = "sandbox";
/** Content-addressed cache of npm packages that components import (see npm-packages.ts). */
export const PACKAGES_DIR = "packages";

export interface LocalMode {
  deps: Deps;
  /** Schedules the timers of every active source (after a restart). */
  startTimers(): Promise<void>;
  /** Stops timers, lets queued runs finish (up to `graceMs`), stops sandboxes, closes the store. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The composition root of local mode: every port on SQLite and this machine. `publicUrl` is the
 * base of HTTP interface endpoints when `SLUICE_PUBLIC_URL` is not set (the server's own URL).
 */
export async function localDeps(config: LocalConfig, log: Logger, publicUrl?: string): Promise<LocalMode> {
  const db = openSqlite(join(config.dataDir, DATABASE_FILE));
  const clock = systemClock;
  const host = new ProcessPoolHost({
    workDir: join(config.dataDir, SANDBOX_DIR),
    heapMb: config.runtime.sandboxHeapMb,
    idleMs: config.runtime.sandboxIdleMs,
    esbuildPlugins: [
      npmPackagesPlugin({
        cacheDir: join(config.dataDir, PACKAGES_DIR),
        ...(config.runtime.npmRegistry ? { registry: config.runtime.npmRegistry } : {}),
      }),
    ],
  });
  // The queue and the timers call back into use cases that need the finished deps.
  let deps!: Deps;
  const runs = new InProcessRunQueue({ run: (job) => runSource(deps, job), log });
  const timers = new LocalTimers({
    clock,
    log,
    onFire: async (sourceId, scheduledAtMs) => {
      await fireTimer(deps, sourceId, scheduledAtMs);
    },
  });
  deps = {
    identity: new SqliteIdentityStore(db),
    usage: new SqliteUsageStore(db),
    components: new SqliteComponentStore(db),
    sources: new SqliteSourceStore(db),
    events: new SqliteEventStore(db),
    secrets: await LocalSecrets.fromDataDir(config.dataDir, config.runtime.secretKey),
    host,
    timers,
    runs,
    fetcher: new UrlCodeFetcher({ allowPrivateAddresses: true }),
    registry: { readCode: (key) => readRegistryComponent(DEFAULT_REGISTRY_DIR, key) },
    clock,
    ids: randomIdGenerator(clock),
    log,
    quotas: config.quotas,
    runtime: {
      publicUrl: config.runtime.publicUrl ?? publicUrl ?? `http://${config.host}:${config.port}`,
      invocationTimeoutMs: config.runtime.invocationTimeoutMs,
    },
  };
  return {
    deps,
    async startTimers() {
      for (const source of await deps.sources.listActiveTimerSources()) {
        if (!source.timer) continue;
        // One bad stored timer must not keep the others from starting.
        await timers
          .schedule(source.id, source.timer)
          .catch((error: unknown) =>
            log.error("a timer could not be scheduled", { source_id: source.id, error: String(error) }),
          );
      }
    },
    async close(graceMs = 5_000) {
      await timers.stop();
      await runs.drain(graceMs);
      await host.close();
      db.close();
    },
  };
}
