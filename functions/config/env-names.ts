/*
 * The names alone, in a module that imports nothing: the `sluice` command line reads a few of them
 * and starts in a second without loading zod (0.6 s here) and the loaders of env.ts.
 */

/**
 * Every environment variable Sluice reads, in one place. `lib/` sets the AWS ones on each
 * function from these names, so the stack and the handlers cannot drift apart.
 */
export const ENV = {
  /** Local mode: TCP port of the REST API. */
  port: "PORT",
  /** Local mode: interface to listen on. */
  host: "SLUICE_HOST",
  /** Local mode: directory of the SQLite file and the api-key file. */
  dataDir: "SLUICE_DATA_DIR",
  /** Local mode: use this API key for the first user instead of generating one. */
  apiKey: "SLUICE_API_KEY",
  /** Local mode: username and e-mail of the first user. */
  username: "SLUICE_USERNAME",
  email: "SLUICE_EMAIL",
  /**
   * Base URL that HTTP interface endpoints are given (`<url>/http/<key>`). Local default:
   * `http://HOST:PORT`; on AWS the service stack sets the API's URL.
   */
  publicUrl: "SLUICE_PUBLIC_URL",
  /** Local mode: base64 of a 32-byte key that seals secret props; default a key file in the data dir. */
  secretKey: "SLUICE_SECRET_KEY",
  /** Time limit of one run or hook of a component, in milliseconds. */
  invocationTimeoutMs: "SLUICE_INVOCATION_TIMEOUT_MS",
  /** Local mode: heap cap of each sandbox process, in MiB. */
  sandboxHeapMb: "SLUICE_SANDBOX_HEAP_MB",
  /** Local mode: what each sandbox process's `/tmp` may hold, in MiB (0: components write no files). */
  sandboxTmpMb: "SLUICE_SANDBOX_TMP_MB",
  /** Local mode: what each project's File Store (`$.files`) may hold, in MiB (0: no files). */
  fileStoreMb: "SLUICE_FILE_STORE_MB",
  /** Local mode: idle sandbox processes are stopped after this many milliseconds. */
  sandboxIdleMs: "SLUICE_SANDBOX_IDLE_MS",
  /** Local mode: sandbox processes per source at most (default 1). */
  sandboxProcesses: "SLUICE_SANDBOX_PROCESSES",
  /** npm registry that component packages are installed from (default: npm's own configuration). */
  npmRegistry: "SLUICE_NPM_REGISTRY",
  /** Events older than this many days are removed (0 keeps them forever). */
  eventRetentionDays: "SLUICE_EVENT_RETENTION_DAYS",
  /** Local mode: the newest this many events of each channel of a source are kept (0: no count limit). */
  eventRetentionPerChannel: "SLUICE_EVENT_RETENTION_PER_CHANNEL",
  /** Webhook delivery: attempts in all, first delay bound, largest delay bound, time limit of one POST. */
  webhookMaxAttempts: "SLUICE_WEBHOOK_MAX_ATTEMPTS",
  webhookBaseDelayMs: "SLUICE_WEBHOOK_BASE_DELAY_MS",
  webhookMaxDelayMs: "SLUICE_WEBHOOK_MAX_DELAY_MS",
  webhookTimeoutMs: "SLUICE_WEBHOOK_TIMEOUT_MS",
  /** Local mode: webhooks delivered to at the same time. */
  webhookConcurrency: "SLUICE_WEBHOOK_CONCURRENCY",
  /** Local mode: deliveries of one webhook in flight at once (1: one at a time, strictly in order). */
  webhookInFlight: "SLUICE_WEBHOOK_IN_FLIGHT",
  /** Local mode: whether webhooks may point at loopback and private addresses (always false on AWS). */
  webhookAllowPrivate: "SLUICE_WEBHOOK_ALLOW_PRIVATE",
  /** Local mode: whether `component_url` may point at loopback and private addresses (always false on AWS). */
  componentUrlAllowPrivate: "SLUICE_COMPONENT_URL_ALLOW_PRIVATE",
  /**
   * Local mode: a components tree in the public registry's layout whose components are served by
   * key (`GET /v1/components/registry/{key}`, `key` on deploys) before the shipped `registry/`;
   * default `<SLUICE_DATA_DIR>/registry`, where `sluice registry add` puts packages.
   */
  registryDir: "SLUICE_REGISTRY_DIR",
  /**
   * A JSON file of apps (docs/accounts.md "Apps") that adds to or replaces, by `name_slug`, the
   * apps Sluice ships (`registry/apps.json`); unset: the shipped apps only.
   */
  appsFile: "SLUICE_APPS_FILE",
  /** AWS: name of the DynamoDB table of resources (set by the service stack). */
  resourcesTable: "SLUICE_RESOURCES_TABLE",
  /** Daily quotas of each workspace, also reported on users and workspaces; 0 means unlimited. */
  dailyInvocationsQuota: "SLUICE_DAILY_INVOCATIONS_QUOTA",
  dailyComputeTimeQuotaMs: "SLUICE_DAILY_COMPUTE_TIME_QUOTA_MS",
  dailyCreditsQuota: "SLUICE_DAILY_CREDITS_QUOTA",
  /** Runs a workspace may start per minute; 0 means unlimited. */
  runsPerMinuteQuota: "SLUICE_RUNS_PER_MINUTE_QUOTA",
  /** Events, and bytes of events, a workspace may keep stored; 0 means unlimited. */
  storedEventsQuota: "SLUICE_STORED_EVENTS_QUOTA",
  storedBytesQuota: "SLUICE_STORED_BYTES_QUOTA",
  /** Events one run (or hook) may emit, and their JSON bytes together. */
  maxEmitsPerRun: "SLUICE_MAX_EMITS_PER_RUN",
  maxEmitBytesPerRun: "SLUICE_MAX_EMIT_BYTES_PER_RUN",
  /** `$.send.*` calls (emits included) one workflow run may make, and their JSON bytes together. */
  maxSendsPerRun: "SLUICE_MAX_SENDS_PER_RUN",
  maxSendBytesPerRun: "SLUICE_MAX_SEND_BYTES_PER_RUN",
  /** JSON bytes of all exports and return values of one workflow run's steps together. */
  maxExportBytesPerRun: "SLUICE_MAX_EXPORT_BYTES_PER_RUN",
  /** Local mode: the data file stops growing at this many MiB (0: no cap); writes past it answer 503 as on a full disk. */
  databaseMaxMb: "SLUICE_DATABASE_MAX_MB",
  /** Local mode: live sandbox processes of all sources at most (default: one per 64 MiB of memory, 8 to 256). */
  sandboxMaxProcesses: "SLUICE_SANDBOX_MAX_PROCESSES",
  /** Lines below this level are not written: `debug`, `info` (default), `warn`, `error`, `silent`. */
  logLevel: "SLUICE_LOG_LEVEL",
  /** Local mode: `text` (one readable line per record; the default on a terminal) or `json` (the default otherwise; always on AWS). */
  logFormat: "SLUICE_LOG_FORMAT",
  /**
   * Buckets a workflow's `$.send.s3` may write to, comma-separated; empty (the default): none. On
   * AWS the stack sets it from `-c s3Buckets=a,b`; locally the objects are files under the data dir.
   */
  s3Buckets: "SLUICE_S3_BUCKETS",
  /**
   * AWS only, set by the stack: the account that must own a `$.send.s3` bucket and the npm trees'
   * bucket (S3's `ExpectedBucketOwner`), so a bucket deleted and re-created by another account is
   * never written to or read from.
   */
  s3ExpectedOwner: "SLUICE_S3_EXPECTED_OWNER",
  /**
   * AWS only, set by the service stack on the functions that install components' npm packages (the
   * deploying routes and the deploy finisher): the bucket whose `npm-trees/` keeps installed trees
   * by resolved dependency set (functions/adapters/npm/installed-trees.ts); unset: each execution
   * environment installs for itself.
   */
  npmTreesBucket: "SLUICE_NPM_TREES_BUCKET",
  /** AWS: the bucket of projects' File Stores (`$.files`), set on the function that serves their calls. */
  fileStoreBucket: "SLUICE_FILE_STORE_BUCKET",
  /** The `sluice` CLI: base URL of the Sluice it talks to, over the saved profile's (the key: `SLUICE_API_KEY`). */
  cliUrl: "SLUICE_URL",
  /** The `sluice` CLI: its profile file is `<this>/sluice/config.json` (default `~/.config`, the XDG rule). */
  xdgConfigHome: "XDG_CONFIG_HOME",
  /** The `sluice` CLI: the command `sluice accounts connect` opens the provider's URL with (default: the platform's opener). */
  browser: "BROWSER",
} as const;
