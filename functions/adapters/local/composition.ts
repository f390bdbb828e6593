import { join } from "node:path";
import { NodeHttpWebhookSender } from "#adapters/node-http-webhook-sender";
import { DEFAULT_REGISTRY_DIR, readRegistryComponent } from "#adapters/registry-files";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import type { LocalConfig } from "#config/env";
import { serialDispatcher } from "#core/dispatcher";
import { fireTimer, runSource } from "#core/source-runs";
import { systemClock } from "#ports/clock";
import type { Deps } from "#ports/deps";
import type { EventPurger } from "#ports/event-purger";
import { randomIdGenerator } from "#ports/id-generator";
import type { Logger } from "#ports/logger";
import { InProcessEventBus } from "./in-process-event-bus.ts";
import { InProcessRunQueue } from "./in-process-run-queue.ts";
import { LocalDeliveryWorker } from "./local-delivery-worker.ts";
import { LocalSecrets } from "./local-secrets.ts";
import { LocalTimers } from "./local-timers.ts";
import { npmPackagesPlugin } from "./npm-packages.ts";
import { ProcessPoolHost } from "./process-pool-host.ts";
import { SqliteComponentStore } from "./sqlite-component-store.ts";
import { openSqlite } from "./sqlite-database.ts";
import { SqliteDeadLetterStore } from "./sqlite-dead-letter-store.ts";
import { SqliteDeliveryQueue } from "./sqlite-delivery-queue.ts";
import { SqliteEventStore } from "./sqlite-event-store.ts";
import { SqliteIdentityStore } from "./sqlite-identity-store.ts";
import { SqliteSourceStore } from "./sqlite-source-store.ts";
import { SqliteSubscriptionStore } from "./sqlite-subscription-store.ts";
import { SqliteUsageStore } from "./sqlite-usage-store.ts";

export const DATABASE_FILE = "sluice.db";
/** Bundles of components, one folder per owner and code hash (see process-pool-host.ts). */
export const SANDBOX_DIR = "sandbox";
/** Content-addressed cache of npm packages that components import (see npm-packages.ts). */
export const PACKAGES_DIR = "packages";

export interface LocalMode {
  deps: Deps;
  /** The bus `deps.bus` publishes on: live streams follow sources through it. */
  bus: InProcessEventBus;
  /** Schedules the timers of every active source (after a restart). */
  startTimers(): Promise<void>;
  /**
   * Stops timers and the retention sweep, lets queued runs, routing and delivery attempts finish
   * (up to `graceMs` each), stops sandboxes, closes the store.
   */
  close(graceMs?: number): Promise<void>;
}

const RETENTION_SWEEP_MS = 60_000;

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
  const events = new SqliteEventStore(db, { retention: config.events });
  const bus = new InProcessEventBus(log);
  const deliveries = new SqliteDeliveryQueue(db);
  // SQLite deletes a range at once, so there is nothing to reclaim later: the purge is a no-op.
  const purger: EventPurger = { purgeLater: (sourceId) => events.purgeDeletedEvents(sourceId) };
  deps = {
    identity: new SqliteIdentityStore(db),
    usage: new SqliteUsageStore(db),
    components: new SqliteComponentStore(db),
    sources: new SqliteSourceStore(db),
    events,
    bus,
    purger,
    subscriptions: new SqliteSubscriptionStore(db),
    deadLetters: new SqliteDeadLetterStore(db),
    deliveries,
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
  // Fan-out: every stored event is routed to its subscriptions; webhook deliveries go through the
  // durable queue to the worker.
  const { allowPrivateAddresses, concurrency, ...retries } = config.webhooks;
  const sender = new NodeHttpWebhookSender({ allowPrivateAddresses });
  const worker = new LocalDeliveryWorker({ queue: deliveries, deps, sender, settings: retries, concurrency });
  const dispatcher = serialDispatcher(deps);
  const unhookDispatcher = bus.subscribeAll(dispatcher.listener);
  worker.start();
  // Expired events are removed in the background, once a minute (docs/events.md "Retention").
  const retentionSweep = setInterval(() => {
    events
      .trimExpired(clock.nowMs())
      .catch((error: unknown) => log.error("event retention sweep failed", { error: String(error) }));
  }, RETENTION_SWEEP_MS);
  retentionSweep.unref();
  return {
    deps,
    bus,
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
      clearInterval(retentionSweep);
      await timers.stop();
      await runs.drain(graceMs);
      unhookDispatcher();
      await dispatcher.drain();
      await worker.stop(graceMs);
      sender.close();
      await host.close();
      db.close();
    },
  };
}
