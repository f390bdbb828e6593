import type { EmitLimits, WorkflowLimits } from "#runtime/protocol";
import type { AppAccountStore } from "./app-account-store.ts";
import type { AppCatalog } from "./app-catalog.ts";
import type { Clock } from "./clock.ts";
import type { CodeFetcher } from "./code-fetcher.ts";
import type { ComponentHost } from "./component-host.ts";
import type { ComponentRegistry } from "./component-registry.ts";
import type { ComponentStore } from "./component-store.ts";
import type { DataStoreStore } from "./data-store-store.ts";
import type { DeadLetterStore } from "./dead-letter-store.ts";
import type { DelayedEmitStore } from "./delayed-emits.ts";
import type { DeliveryQueue } from "./delivery-queue.ts";
import type { DeployFinisher } from "./deploy-finisher.ts";
import type { EventBus } from "./event-bus.ts";
import type { EventPurger } from "./event-purger.ts";
import type { EventStore } from "./event-store.ts";
import type { FileStore } from "./file-store.ts";
import type { IdGenerator } from "./id-generator.ts";
import type { IdentityStore } from "./identity-store.ts";
import type { Logger } from "./logger.ts";
import type { ObjectSink } from "./object-sink.ts";
import type { PausedRunStore } from "./paused-runs.ts";
import type { ProviderHttp } from "./provider-http.ts";
import type { RunQueue } from "./run-queue.ts";
import type { Secrets } from "./secrets.ts";
import type { SourceRunLock } from "./source-run-lock.ts";
import type { SourceStore } from "./source-store.ts";
import type { SubscriptionStore } from "./subscription-store.ts";
import type { Timers } from "./timers.ts";
import type { UsageStore } from "./usage-store.ts";
import type { WorkflowRunStore } from "./workflow-run-store.ts";
import type { WorkflowStore } from "./workflow-store.ts";

/**
 * Quotas of each workspace (docs/components.md "Limits"); zero means unlimited. The daily ones are
 * also reported on users and workspaces.
 */
export interface Quotas {
  dailyInvocations: number;
  dailyComputeTimeMs: number;
  dailyCredits: number;
  /** Runs (of HTTP requests, timers, subscriptions) started per minute. */
  runsPerMinute: number;
  /** Events kept stored, `$logs` and `$errors` included. */
  storedEvents: number;
  /** UTF-8 bytes of the JSON of the events kept stored. */
  storedBytes: number;
}

/** Settings of the component runtime, the same on both platforms. */
export interface RuntimeSettings {
  /** Base of HTTP interface endpoints: a source's endpoint is `<publicUrl>/http/<key>`. */
  publicUrl: string;
  /** Time limit of one run or hook. */
  invocationTimeoutMs: number;
  /** How much one run or hook may emit. */
  emitLimits: EmitLimits;
  /** What one workflow run may send and export, besides `emitLimits` (docs/components.md "Limits"). */
  workflowLimits: WorkflowRunLimits;
  /**
   * Whether an `http_request` prop's `execute()` may reach loopback and private addresses: local
   * mode's `SLUICE_WEBHOOK_ALLOW_PRIVATE`, never on AWS.
   * @default false
   */
  allowPrivateAddresses?: boolean;
}

/** The limits of a workflow run that are not emit limits. */
export type WorkflowRunLimits = Omit<WorkflowLimits, keyof EmitLimits>;

/**
 * What use cases and handlers receive. Each platform has one composition root that builds it:
 * `functions/local-mode/composition.ts` and `functions/adapters/aws/composition.ts`.
 */
export interface Deps {
  identity: IdentityStore;
  usage: UsageStore;
  components: ComponentStore;
  sources: SourceStore;
  /** Workflows, their triggers' keys and timers, their steps' states. */
  workflows: WorkflowStore;
  /** Runs of workflows: the once-only gate and the record of each. */
  workflowRuns: WorkflowRunStore;
  /** Workflow runs paused by `$.flow.suspend`, `delay` and `rerun`, until they go on. */
  pausedRuns: PausedRunStore;
  events: EventStore;
  /** Announces stored events (live streams). */
  bus: EventBus;
  /** Reclaims the space of deleted events in the background. */
  purger: EventPurger;
  /** Finishes deploys a request could not fit in its time (AWS); absent: every deploy finishes in its request. */
  deployFinisher?: DeployFinisher;
  /** Delayed emits waiting for their `delivery_ts`; absent (AWS): they are emitted at once. */
  delayedEmits?: DelayedEmitStore;
  /** Webhooks, subscriptions and auto subscriptions. */
  subscriptions: SubscriptionStore;
  /** Webhook deliveries waiting to be attempted (durable). */
  deliveries: DeliveryQueue;
  /** Webhook deliveries that failed every attempt. */
  deadLetters: DeadLetterStore;
  /** Workspaces' data stores and their records (`data_store` props). */
  dataStores: DataStoreStore;
  /** Connected accounts (`apn_`) and OAuth authorizations in progress. */
  appAccounts: AppAccountStore;
  /** The apps accounts can be connected to (`GET /v1/apps`). */
  apps: AppCatalog;
  /** Requests to apps' providers: OAuth token endpoints and test requests. */
  providers: ProviderHttp;
  /** Where `$.send.s3` writes, and which buckets it may. */
  objects: ObjectSink;
  /** Projects' File Stores (`$.files`). */
  files: FileStore;
  secrets: Secrets;
  host: ComponentHost;
  timers: Timers;
  runs: RunQueue;
  /** One run at a time for sources with a `$.service.db` prop. */
  runLock: SourceRunLock;
  fetcher: CodeFetcher;
  registry: ComponentRegistry;
  clock: Clock;
  ids: IdGenerator;
  log: Logger;
  quotas: Quotas;
  runtime: RuntimeSettings;
}
