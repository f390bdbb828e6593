import { randomBytes } from "node:crypto";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { LocalSourceRunLock } from "#adapters/local/local-source-run-lock";
import { SqliteAppAccountStore } from "#adapters/local/sqlite-app-account-store";
import { SqliteComponentStore } from "#adapters/local/sqlite-component-store";
import { SqliteDataStoreStore } from "#adapters/local/sqlite-data-store-store";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import { SqlitePausedRuns } from "#adapters/local/sqlite-paused-runs";
import { SqliteSourceStore } from "#adapters/local/sqlite-source-store";
import { SqliteSubscriptionStore } from "#adapters/local/sqlite-subscription-store";
import { SqliteUsageStore } from "#adapters/local/sqlite-usage-store";
import { SqliteWorkflowRunStore } from "#adapters/local/sqlite-workflow-run-store";
import { SqliteWorkflowStore } from "#adapters/local/sqlite-workflow-store";
import { NodeHttpProviderClient } from "#adapters/node-http-provider-client";
import { createAccount } from "#core/accounts";
import type { ComponentDescription } from "#core/component-model";
import { staticAppCatalog } from "#core/ports/app-catalog";
import type { Clock } from "#core/ports/clock";
import type { ComponentHost, InvokeHandlers, WorkflowCode } from "#core/ports/component-host";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { silentLogger } from "#core/ports/logger";
import type { Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";

/** A port a test did not provide: any use of it fails loudly, naming the port. */
function missing<T extends object>(port: string): T {
  return new Proxy({} as T, {
    get: (_target, member) => {
      if (member === "then") return undefined;
      throw new Error(`memoryDeps: the test provided no ${port} (used ${String(member)})`);
    },
  });
}

type Overrides = Partial<
  Pick<
    Deps,
    | "host"
    | "timers"
    | "runs"
    | "fetcher"
    | "registry"
    | "bus"
    | "purger"
    | "deliveries"
    | "runLock"
    | "objects"
    | "files"
    | "apps"
    | "providers"
  >
>;

/**
 * Real local stores on a private in-memory SQLite database (`sqlite`), a clock the test controls,
 * and the compute ports the test passes (the others throw when used).
 */
export function memoryDeps(
  startMs = Date.UTC(2026, 10, 20, 12),
  overrides: Overrides = {},
): Deps & { clock: Clock & { set(ms: number): void }; sqlite: SqliteDatabase } {
  const db = openSqlite(":memory:");
  let now = startMs;
  const clock = { nowMs: () => now, set: (ms: number) => (now = ms) };
  const events = new SqliteEventStore(db);
  return {
    identity: new SqliteIdentityStore(db),
    usage: new SqliteUsageStore(db),
    components: new SqliteComponentStore(db),
    sources: new SqliteSourceStore(db),
    workflows: new SqliteWorkflowStore(db),
    workflowRuns: new SqliteWorkflowRunStore(db),
    pausedRuns: new SqlitePausedRuns(db),
    events,
    bus: overrides.bus ?? new InProcessEventBus(silentLogger),
    purger: overrides.purger ?? { purgeLater: (sourceId) => events.purgeDeletedEvents(sourceId) },
    subscriptions: new SqliteSubscriptionStore(db),
    deadLetters: new SqliteDeadLetterStore(db),
    dataStores: new SqliteDataStoreStore(db),
    appAccounts: new SqliteAppAccountStore(db),
    apps: overrides.apps ?? staticAppCatalog([]),
    // Real HTTP: tests point apps at stand-in providers on 127.0.0.1.
    providers: overrides.providers ?? new NodeHttpProviderClient({ allowPrivateAddresses: true }),
    deliveries: overrides.deliveries ?? missing("deliveries"),
    objects: overrides.objects ?? missing("objects"),
    files: overrides.files ?? missing("files"),
    secrets: new LocalSecrets(randomBytes(32)),
    host: overrides.host ?? missing("host"),
    timers: overrides.timers ?? missing("timers"),
    runs: overrides.runs ?? missing("runs"),
    runLock: overrides.runLock ?? new LocalSourceRunLock(clock),
    fetcher: overrides.fetcher ?? missing("fetcher"),
    registry: overrides.registry ?? missing("registry"),
    clock,
    ids: randomIdGenerator(clock),
    log: silentLogger,
    quotas: {
      dailyInvocations: 1000,
      dailyComputeTimeMs: 60_000,
      dailyCredits: 500,
      runsPerMinute: 0,
      storedEvents: 0,
      storedBytes: 0,
    },
    runtime: {
      publicUrl: "http://127.0.0.1:4000",
      invocationTimeoutMs: 5_000,
      emitLimits: { maxEmits: 1_000, maxEmitBytes: 8 * 1024 * 1024 },
      workflowLimits: { maxSends: 100, maxSendBytes: 4 * 1024 * 1024, maxExportBytes: 8 * 1024 * 1024 },
    },
    sqlite: db,
  };
}

export async function accountIn(deps: Deps, username: string) {
  return createAccount(deps, { username, email: `${username}@example.com` });
}

/** What a scripted component "does" on one invocation: the parts of its result that are not empty. */
export type Script = (
  invocation: Invocation,
  handlers: InvokeHandlers | undefined,
) => Promise<Partial<InvocationResult>>;

/**
 * What a scripted workflow "does" on one run: the parts of its result that are not empty. By
 * default every step of the invocation succeeds.
 */
export type WorkflowScript = (invocation: WorkflowInvocation) => Promise<Partial<WorkflowResult>>;

/**
 * A host that runs no code: it describes every component as a source with `description`'s fields
 * (no hooks, no props by default) and answers each invocation with `script`'s result, and each
 * workflow run with `workflowScript`'s (when given; otherwise it refuses to run workflows). `calls`
 * and `workflowCalls` are the invocations in order. For testing the trusted side (use cases, props,
 * effects) on its own; the real sandbox runs in test/compat and test/e2e.
 */
export function scriptedHost(
  description: Partial<ComponentDescription> = {},
  script: Script = async () => ({}),
  workflowScript?: WorkflowScript,
) {
  const calls: Invocation[] = [];
  const workflowCalls: WorkflowInvocation[] = [];
  /** The code each workflow invocation was given, in order. */
  const workflowCodes: WorkflowCode[] = [];
  const host: ComponentHost = {
    describe: async () => ({
      type: "source",
      hooks: [],
      methods: [],
      hasRun: true,
      hasAdditionalProps: false,
      props: [],
      name: "Scripted",
      version: "1.0.0",
      ...description,
    }),
    prepare: async () => {},
    remove: async () => {},
    prepareWorkflow: async () => {},
    removeWorkflow: async () => {},
    invokeWorkflow: async (workflow, invocation) => {
      if (!workflowScript) throw new Error("scriptedHost runs no workflow");
      workflowCalls.push(invocation);
      workflowCodes.push(workflow);
      const partial = await workflowScript(invocation);
      const steps = invocation.steps.map((step) => ({
        id: step.id,
        status: "success" as const,
        exportBytes: 0,
        dbWrites: {},
        durationMs: 1,
      }));
      return { invocationId: invocation.invocationId, steps, sends: [], logs: [], durationMs: 1, ...partial };
    },
    invoke: async (_source, invocation, handlers) => {
      calls.push(invocation);
      const partial = await script(invocation, handlers);
      return { invocationId: invocation.invocationId, emits: [], dbWrites: {}, logs: [], durationMs: 1, ...partial };
    },
  };
  return { host, calls, workflowCalls, workflowCodes };
}
