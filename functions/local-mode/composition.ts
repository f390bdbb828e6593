import { join } from "node:path";
import { loadAppCatalog } from "#adapters/app-catalog-files";
import { DiskFileStore } from "#adapters/local/disk-file-store";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { LocalObjectSink } from "#adapters/local/local-object-sink";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { LocalSourceRunLock } from "#adapters/local/local-source-run-lock";
import { LocalTimers } from "#adapters/local/local-timers";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { SqliteAppAccountStore } from "#adapters/local/sqlite-app-account-store";
import { startWalCheckpointer } from "#adapters/local/sqlite-checkpointer";
import { SqliteComponentStore } from "#adapters/local/sqlite-component-store";
import { SqliteDataStoreStore } from "#adapters/local/sqlite-data-store-store";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteDelayedEmits } from "#adapters/local/sqlite-delayed-emits";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import { SqliteOutbox } from "#adapters/local/sqlite-outbox";
import { SqlitePausedRuns } from "#adapters/local/sqlite-paused-runs";
import { SqliteRunQueue } from "#adapters/local/sqlite-run-queue";
import { SqliteSourceStore } from "#adapters/local/sqlite-source-store";
import { SqliteSubscriptionStore } from "#adapters/local/sqlite-subscription-store";
import { SqliteUsageStore } from "#adapters/local/sqlite-usage-store";
import { SqliteWorkflowRunStore } from "#adapters/local/sqlite-workflow-run-store";
import { SqliteWorkflowStore } from "#adapters/local/sqlite-workflow-store";
import { storageErrorTranslator, translatingErrors } from "#adapters/local/storage-errors";
import { ThreadedWebhookSender } from "#adapters/local/threaded-webhook-sender";
import { NodeHttpProviderClient } from "#adapters/node-http-provider-client";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { DEFAULT_REGISTRY_DIR, registryFiles } from "#adapters/registry-files";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import type { LocalConfig } from "#config/env";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import type { EventPurger } from "#core/ports/event-purger";
import { randomIdGenerator } from "#core/ports/id-generator";
import type { Logger } from "#core/ports/logger";
import { recoverInterruptedDeploys } from "#core/sources";
import { startAccountRefreshDriver } from "./drivers/account-refresh-driver.ts";
import { startDelayedEmitDriver } from "./drivers/delayed-emit-driver.ts";
import { LocalDeliveryWorker } from "./drivers/delivery-worker.ts";
import { OutboxRelay } from "./drivers/outbox-relay.ts";
import { startPausedRunDriver } from "./drivers/paused-run-driver.ts";
import { localDrivers } from "./drivers/source-runner.ts";

export const DATABASE_FILE = "sluice.db";
/** Bundles of components, one folder per owner and code hash (see process-pool-host.ts). */
export const SANDBOX_DIR = "sandbox";
/** Content-addressed cache of npm packages that components import (see adapters/npm/package-cache.ts). */
export const PACKAGES_DIR = "packages";

export interface LocalMode {
  deps: Deps;
  /** The bus `deps.bus` publishes on: live streams follow sources through it. */
  bus: InProcessEventBus;
  /** `deps.files`, whose URLs the local server serves (file-store-server.ts). */
  files: DiskFileStore;
  /** Schedules the timers of every active source and every active workflow's timer triggers (after a restart). */
  startTimers(): Promise<void>;
  /**
   * Stops timers and the sweeps, lets queued runs, routing and delivery attempts finish (up to
   * `graceMs` each; runs not started stay queued for the next start), stops sandboxes, closes the
   * store.
   */
  close(graceMs?: number): Promise<void>;
}

const RETENTION_SWEEP_MS = 60_000;
/** How often the outbox is swept, and how old a row must be to be dispatched again by a sweep. */
const OUTBOX_SWEEP_MS = 60_000;

/**
 * The composition root of local mode: every port on SQLite and this machine. `publicUrl` is the
 * base of HTTP interface endpoints when `SLUICE_PUBLIC_URL` is not set (the server's own URL).
 */
export async function localDeps(config: LocalConfig, log: Logger, publicUrl?: string): Promise<LocalMode> {
  const file = join(config.dataDir, DATABASE_FILE);
  const db = openSqlite(file, { maxMb: config.databaseMaxMb });
  // A full or read-only data dir answers 503 and is retried, never taken for a bug (storage-errors.ts).
  const translate = storageErrorTranslator(config.dataDir, log);
  const guarded = <T extends object>(port: T, name: string): T => translatingErrors(port, name, translate);
  // Checkpoints (copying the WAL back, with fsyncs) run in a worker, never on the event loop.
  const checkpointer = await startWalCheckpointer(db, file, log);
  const clock = systemClock;
  const host = new ProcessPoolHost({
    workDir: join(config.dataDir, SANDBOX_DIR),
    heapMb: config.runtime.sandboxHeapMb,
    tmpMb: config.runtime.sandboxTmpMb,
    processes: config.runtime.sandboxProcesses,
    maxProcesses: config.runtime.sandboxMaxProcesses,
    idleMs: config.runtime.sandboxIdleMs,
    log,
    esbuildPlugins: [
      npmPackagesPlugin({
        cacheDir: join(config.dataDir, PACKAGES_DIR),
        ...(config.runtime.npmRegistry ? { registry: config.runtime.npmRegistry } : {}),
      }),
    ],
  });
  // The queue and the timers call drivers (drivers/source-runner.ts) that need the finished deps.
  let deps!: Deps;
  // Durable: jobs are rows until their run is applied (docs/durability.md).
  const drivers = localDrivers(() => deps, log);
  const runs = new SqliteRunQueue(db, { run: (job) => drivers.run(job), log });
  const timers = new LocalTimers({ clock, log, onFire: (target, at) => drivers.fire(target, at) });
  // Each append also writes its outbox row, removed once its events are routed.
  const outbox = new SqliteOutbox(db);
  const events = new SqliteEventStore(db, { retention: config.events, outbox });
  const bus = new InProcessEventBus(log);
  const deliveries = new SqliteDeliveryQueue(db);
  // SQLite deletes a range at once, so there is nothing to reclaim later: the purge is a no-op.
  const purger: EventPurger = { purgeLater: (sourceId) => events.purgeDeletedEvents(sourceId) };
  // Usage additions and appends are grouped per turn of the event loop; close writes what is pending.
  const usage = new SqliteUsageStore(db);
  // Run records are grouped per turn too, and kept as long as events.
  const workflowRuns = new SqliteWorkflowRunStore(db, { retention: config.events });
  // Also polled by the driver below, which needs `due` (not on the `Deps` port).
  const delayedEmits = guarded(new SqliteDelayedEmits(db), "delayedEmits");
  // The same for paused workflow runs (`due`, `touch`).
  const pausedRuns = guarded(new SqlitePausedRuns(db), "pausedRuns");
  const secrets = await LocalSecrets.fromDataDir(config.dataDir, config.runtime.secretKey);
  // Its URLs are served by the local server (file-store-server.ts), at the URL runs see.
  const files = new DiskFileStore({
    dataDir: config.dataDir,
    secrets,
    publicUrl: () => deps.runtime.publicUrl,
    now: () => clock.nowMs(),
    maxProjectBytes: config.runtime.fileStoreMb * 1024 * 1024,
  });
  // What a killed process left half uploaded goes before any upload of this one.
  await files.clearIncoming((message) => log.warn(message));
  deps = {
    identity: guarded(new SqliteIdentityStore(db), "identity"),
    usage: guarded(usage, "usage"),
    components: guarded(new SqliteComponentStore(db), "components"),
    sources: guarded(new SqliteSourceStore(db), "sources"),
    workflows: guarded(new SqliteWorkflowStore(db), "workflows"),
    workflowRuns: guarded(workflowRuns, "workflowRuns"),
    pausedRuns,
    events: guarded(events, "events"),
    bus,
    purger,
    subscriptions: guarded(new SqliteSubscriptionStore(db), "subscriptions"),
    deadLetters: guarded(new SqliteDeadLetterStore(db), "deadLetters"),
    dataStores: guarded(new SqliteDataStoreStore(db), "dataStores"),
    appAccounts: guarded(new SqliteAppAccountStore(db), "appAccounts"),
    apps: loadAppCatalog(DEFAULT_REGISTRY_DIR, config.runtime.appsFile),
    // Token endpoints and test requests follow the rule of the server's other outbound requests.
    providers: new NodeHttpProviderClient({ allowPrivateAddresses: config.webhooks.allowPrivateAddresses }),
    deliveries: guarded(deliveries, "deliveries"),
    delayedEmits,
    objects: new LocalObjectSink(config.dataDir, config.s3Buckets),
    files,
    secrets,
    // Bundles are written to the data dir too.
    host: guarded(host, "host"),
    timers,
    runs: guarded(runs, "runs"),
    // In process: this server is the only one on its data dir (data-dir.ts).
    runLock: new LocalSourceRunLock(clock),
    fetcher: new UrlCodeFetcher({ allowPrivateAddresses: config.runtime.componentUrlAllowPrivate }),
    registry: registryFiles(DEFAULT_REGISTRY_DIR, config.runtime.registryDir),
    clock,
    ids: randomIdGenerator(clock),
    log,
    quotas: config.quotas,
    runtime: {
      publicUrl: config.runtime.publicUrl ?? publicUrl ?? `http://${config.host}:${config.port}`,
      invocationTimeoutMs: config.runtime.invocationTimeoutMs,
      emitLimits: config.runtime.emitLimits,
      workflowLimits: config.runtime.workflowLimits,
      // execute() of an http_request prop follows the rule of the server's other outbound requests.
      allowPrivateAddresses: config.webhooks.allowPrivateAddresses,
    },
  };
  // Fan-out: every stored event is routed to its subscriptions; webhook deliveries go through the
  // durable queue to the worker, runs of listening sources through the durable run queue.
  const { allowPrivateAddresses, concurrency, inFlightPerWebhook, ...retries } = config.webhooks;
  // Requests are made on another thread (decision 270); signing, the queue and retries stay here.
  const sender = new ThreadedWebhookSender({ allowPrivateAddresses, workDir: join(config.dataDir, SANDBOX_DIR), log });
  const worker = new LocalDeliveryWorker({
    queue: deliveries,
    deps,
    sender,
    settings: retries,
    concurrency,
    inFlightPerWebhook,
  });
  const relay = new OutboxRelay({ outbox, events, deps });
  const unhookDispatcher = bus.subscribeAll(relay.listener);
  const sweeps: NodeJS.Timeout[] = [];
  worker.start();
  // What a previous process appended but did not finish routing is routed before any request.
  await relay.redispatch(Number.POSITIVE_INFINITY);
  // Workflow runs it left `running` were cut short by its end: a queued one's job takes it over at
  // once, and one that was not queued is ended as an error (decisions 235 and 236).
  workflowRuns.recoverAtStart(clock.nowMs());
  // Sources a previous process was deploying when it ended are half made: removed before any
  // request or run (this process is the only one on the data dir, so none is still deploying).
  await recoverInterruptedDeploys(deps, clock.nowMs());
  // Runs it left go first (they see the configured URL as their endpoint's base until the
  // server sets the one it listens on, which only differs with PORT=0).
  runs.start();
  // Delayed emits: what is due (also what a stopped process left) is emitted within a second.
  const delayedEmitDriver = startDelayedEmitDriver(deps, delayedEmits);
  // Paused workflow runs whose time came (also what a stopped process left) go on within a second.
  const pausedRunDriver = startPausedRunDriver(deps, pausedRuns);
  // OAuth tokens expiring within ten minutes are renewed in the background (docs/accounts.md "Refresh").
  const accountRefreshDriver = startAccountRefreshDriver(deps);
  // Then, every minute, what a failed dispatch left (docs/durability.md).
  sweeps.push(
    setInterval(() => {
      relay
        .redispatch(clock.nowMs() - OUTBOX_SWEEP_MS)
        .catch((error: unknown) => log.error("outbox sweep failed", { error: String(error) }));
    }, OUTBOX_SWEEP_MS),
  );
  // Expired events and workflow runs are removed in the background, once a minute (docs/events.md "Retention").
  sweeps.push(
    setInterval(() => {
      events
        .trimExpired(clock.nowMs())
        .catch((error: unknown) => log.error("event retention sweep failed", { error: String(error) }));
      workflowRuns
        .trimExpired(clock.nowMs())
        .catch((error: unknown) => log.error("workflow run retention sweep failed", { error: String(error) }));
    }, RETENTION_SWEEP_MS),
  );
  for (const sweep of sweeps) sweep.unref();
  return {
    deps,
    bus,
    files,
    async startTimers() {
      const sources = (await deps.sources.listActiveTimerSources()).flatMap((source) =>
        source.timer ? [{ target: { sourceId: source.id }, spec: source.timer }] : [],
      );
      const workflows = (await deps.workflows.listActiveTimerTriggers()).map(({ workflowId, timerId, spec }) => ({
        target: { workflowId, timerId },
        spec,
      }));
      for (const { target, spec } of [...sources, ...workflows]) {
        // One bad stored timer must not keep the others from starting.
        await timers
          .schedule(target, spec)
          .catch((error: unknown) => log.error("a timer could not be scheduled", { ...target, error: String(error) }));
      }
    },
    async close(graceMs = 5_000) {
      for (const sweep of sweeps) clearInterval(sweep);
      await delayedEmitDriver.stop();
      await pausedRunDriver.stop();
      await accountRefreshDriver.stop();
      await timers.stop();
      await runs.drain(graceMs);
      unhookDispatcher();
      await relay.drain();
      // Jobs not started stay queued (with those the dispatches above added) for the next start.
      runs.stop();
      outbox.flush();
      await worker.stop(graceMs);
      await sender.close();
      await host.close();
      events.flushAppends();
      usage.flush();
      workflowRuns.flush();
      await checkpointer.stop();
      db.close();
    },
  };
}
