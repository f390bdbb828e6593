import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { ownerOnlyFiles, reasonOf } from "./data-dir.ts";
import { APP_ACCOUNT_MIGRATIONS } from "./sqlite-app-account-schema.ts";
import { DATA_STORE_MIGRATIONS } from "./sqlite-data-store-schema.ts";
import { DELAYED_EMIT_MIGRATIONS } from "./sqlite-delayed-emits.ts";
import { DELIVERY_CLAIM_INDEXES, DELIVERY_MIGRATIONS } from "./sqlite-delivery-schema.ts";
import { EVENT_COUNT_MIGRATIONS } from "./sqlite-event-schema.ts";
import { OUTBOX_MIGRATIONS } from "./sqlite-outbox-schema.ts";
import { PAUSED_RUN_MIGRATIONS } from "./sqlite-paused-runs.ts";
import { RUN_QUEUE_ATTEMPT_MIGRATIONS, RUN_QUEUE_MIGRATIONS } from "./sqlite-run-queue-schema.ts";
import {
  DEAD_LETTER_COUNT_MIGRATIONS,
  SEND_DEAD_LETTER_MIGRATIONS,
  SUBSCRIPTION_MIGRATIONS,
} from "./sqlite-subscription-schema.ts";
import { STORED_USAGE_MIGRATIONS } from "./sqlite-usage-schema.ts";
import { WORKFLOW_MIGRATIONS } from "./sqlite-workflow-schema.ts";

export type SqliteDatabase = Database.Database;

/**
 * The message of a failed UNIQUE or PRIMARY KEY constraint, which names the columns
 * (`UNIQUE constraint failed: sources.endpoint_key`); undefined for every other error.
 */
export function violatedConstraint(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== "SQLITE_CONSTRAINT_UNIQUE" && code !== "SQLITE_CONSTRAINT_PRIMARYKEY") return undefined;
  return String((error as Error).message);
}

/**
 * Schema migrations, applied in order; `PRAGMA user_version` records how many have run.
 * Append only: a released migration never changes.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE users (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    email TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE api_keys (
    hash TEXT PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users(id),
    label TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE workspaces (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    orgname TEXT NOT NULL,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE memberships (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    user_id TEXT NOT NULL REFERENCES users(id),
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
  );
  CREATE INDEX memberships_by_user ON memberships (user_id, workspace_id);
  CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX projects_by_workspace ON projects (workspace_id, id);
  CREATE TABLE usage (
    owner_id TEXT NOT NULL,
    day TEXT NOT NULL,
    invocations INTEGER NOT NULL DEFAULT 0,
    compute_time_ms INTEGER NOT NULL DEFAULT 0,
    credits INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, day)
  );
  `,
  // Components, sources, their state and their events. No foreign keys to users or workspaces:
  // the stores are used (and contract-tested) on their own, and the core checks ownership.
  `
  CREATE TABLE components (
    id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL,
    key TEXT,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    code TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    component_url TEXT,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX components_by_key ON components (owner_id, key, id) WHERE key IS NOT NULL;
  CREATE TABLE sources (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    component_id TEXT NOT NULL,
    name TEXT NOT NULL,
    name_slug TEXT NOT NULL,
    configured_props TEXT NOT NULL,
    active INTEGER NOT NULL,
    endpoint_key TEXT UNIQUE,
    timer TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (user_id, name_slug)
  );
  CREATE INDEX sources_by_user ON sources (user_id, id);
  CREATE INDEX sources_by_workspace ON sources (workspace_id, id);
  CREATE INDEX sources_with_active_timer ON sources (id) WHERE active = 1 AND timer IS NOT NULL;
  CREATE TABLE source_states (
    source_id TEXT PRIMARY KEY,
    db TEXT NOT NULL,
    dedupe TEXT NOT NULL,
    version INTEGER NOT NULL
  );
  CREATE TABLE event_sequences (
    source_id TEXT PRIMARY KEY,
    last_ms INTEGER NOT NULL,
    last_n INTEGER NOT NULL
  );
  CREATE TABLE events (
    source_id TEXT NOT NULL,
    ms INTEGER NOT NULL,
    n INTEGER NOT NULL,
    channel TEXT NOT NULL,
    indexed_at_ms INTEGER NOT NULL,
    event TEXT NOT NULL,
    emit_id TEXT NOT NULL,
    meta TEXT NOT NULL,
    PRIMARY KEY (source_id, ms, n)
  );
  CREATE INDEX events_by_channel ON events (source_id, channel, ms, n);
  `,
  // The final prop set of a source whose component has `additionalProps` (JSON; NULL otherwise).
  `ALTER TABLE sources ADD COLUMN prop_definitions TEXT;`,
  // Webhooks, subscriptions, auto subscriptions and dead letters (kept beside their store).
  ...SUBSCRIPTION_MIGRATIONS,
  // The durable queue of webhook deliveries (kept beside the queue).
  ...DELIVERY_MIGRATIONS,
  // The durable queue of source runs, and the outbox of appended events not yet routed.
  ...RUN_QUEUE_MIGRATIONS,
  ...OUTBOX_MIGRATIONS,
  // The webhook delivery queue's claim indexes (sqlite-delivery-schema.ts).
  DELIVERY_CLAIM_INDEXES,
  // What each workspace keeps stored, for the storage quotas (sqlite-usage-schema.ts).
  ...STORED_USAGE_MIGRATIONS,
  // Per-channel event counts and the index of listed channels (sqlite-event-schema.ts).
  ...EVENT_COUNT_MIGRATIONS,
  // Per-webhook dead letter counts (sqlite-subscription-schema.ts).
  ...DEAD_LETTER_COUNT_MIGRATIONS,
  // Workflows, their triggers' keys and timers, their steps' states and their runs (sqlite-workflow-schema.ts).
  ...WORKFLOW_MIGRATIONS,
  ...SEND_DEAD_LETTER_MIGRATIONS,
  // The workflow that deployed a source as its trigger (NULL for every other source).
  `ALTER TABLE sources ADD COLUMN workflow_id TEXT;`,
  // Data stores and their records (sqlite-data-store-schema.ts).
  ...DATA_STORE_MIGRATIONS,
  // Delayed emits waiting for their delivery_ts (sqlite-delayed-emits.ts).
  ...DELAYED_EMIT_MIGRATIONS,
  // Deploys in progress and the Idempotency-Key of each keyed create (sqlite-source-store.ts).
  `
  ALTER TABLE sources ADD COLUMN deploying_since INTEGER;
  CREATE INDEX sources_deploying ON sources (deploying_since) WHERE deploying_since IS NOT NULL;
  CREATE TABLE deploy_claims (
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    source_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
  );
  CREATE INDEX deploy_claims_by_source ON deploy_claims (source_id);
  `,
  // Connected accounts and OAuth authorizations in progress (sqlite-app-account-schema.ts).
  ...APP_ACCOUNT_MIGRATIONS,
  // A deploy's step left to the background, and why one failed there (sqlite-source-store.ts).
  `
  ALTER TABLE sources ADD COLUMN deploy_step TEXT;
  ALTER TABLE sources ADD COLUMN deploy_error TEXT;
  `,
  // The background refresh lists healthy OAuth accounts by token expiry, across workspaces.
  `CREATE INDEX app_accounts_by_expiry ON app_accounts (expires_at) WHERE expires_at IS NOT NULL AND healthy = 1;`,
  // The settings an update in progress replaces (sqlite-source-store.ts, SourceRecord.updateFrom).
  `ALTER TABLE sources ADD COLUMN update_from TEXT;`,
  // A source's queued runs past its limit in memory are kept only in the file, marked with its id
  // (sqlite-run-queue.ts, `maxHeldPerSource`), and read back in order; other rows leave it NULL.
  `
  ALTER TABLE run_jobs ADD COLUMN target TEXT;
  CREATE INDEX run_jobs_spilled ON run_jobs (target, seq) WHERE target IS NOT NULL;
  `,
  // A queued run's failures and the starts that never ended, and the runs set aside after three
  // (sqlite-run-queue.ts, `MAX_QUEUED_RUN_ATTEMPTS`).
  ...RUN_QUEUE_ATTEMPT_MIGRATIONS,
  // Workflow runs paused by `$.flow.suspend`, `delay` and `rerun` (sqlite-paused-runs.ts).
  ...PAUSED_RUN_MIGRATIONS,
];

/**
 * Opens (creating if needed) the SQLite file of local mode: WAL so readers never wait for the
 * writer, NORMAL sync (WAL keeps it crash-safe; a power cut may lose the last commits, never
 * corrupt), foreign keys on, and every pending migration applied in one transaction each. The
 * file and its `-wal` and `-shm` companions are readable by their owner only. A file that cannot
 * be opened, or migrated, fails with an error naming it. Pass `":memory:"` for a private in-memory
 * database.
 */
export function openSqlite(file: string, options: SqliteOptions = {}): SqliteDatabase {
  if (file === ":memory:") return configure(new Database(file), options);
  let db: SqliteDatabase | undefined;
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    ownerOnlyFiles(file);
    db = new Database(file);
    return configure(db, options);
  } catch (error) {
    db?.close();
    throw new Error(`cannot open the data file ${resolve(file)}: ${reasonOf(error)}`, { cause: error });
  }
}

export interface SqliteOptions {
  /**
   * The file stops growing at this many MiB (SQLite's `max_page_count`): a write that needs more
   * fails with `SQLITE_FULL`, as on a full disk. A file larger already cannot grow at all.
   * @default 0 (no cap)
   */
  maxMb?: number;
}

function configure(db: SqliteDatabase, options: SqliteOptions): SqliteDatabase {
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  migrate(db);
  if (options.maxMb) {
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    db.pragma(`max_page_count = ${Math.max(1, Math.floor((options.maxMb * 1024 * 1024) / pageSize))}`);
  }
  return db;
}

function migrate(db: SqliteDatabase): void {
  const applied = db.pragma("user_version", { simple: true }) as number;
  if (applied > MIGRATIONS.length) {
    throw new Error(
      `the data file was written by a newer Sluice (schema ${applied}, this version knows ${MIGRATIONS.length})`,
    );
  }
  MIGRATIONS.slice(applied).forEach((sql, index) => {
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${applied + index + 1}`);
    })();
  });
}
