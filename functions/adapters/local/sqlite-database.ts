import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { DELIVERY_CLAIM_INDEXES, DELIVERY_MIGRATIONS } from "./sqlite-delivery-schema.ts";
import { EVENT_COUNT_MIGRATIONS } from "./sqlite-event-schema.ts";
import { OUTBOX_MIGRATIONS } from "./sqlite-outbox-schema.ts";
import { RUN_QUEUE_MIGRATIONS } from "./sqlite-run-queue-schema.ts";
import { DEAD_LETTER_COUNT_MIGRATIONS, SUBSCRIPTION_MIGRATIONS } from "./sqlite-subscription-schema.ts";

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
  // Per-channel event counts and the index of listed channels (sqlite-event-schema.ts).
  ...EVENT_COUNT_MIGRATIONS,
  // Per-webhook dead letter counts (sqlite-subscription-schema.ts).
  ...DEAD_LETTER_COUNT_MIGRATIONS,
];

/**
 * Opens (creating if needed) the SQLite file of local mode: WAL so readers never wait for the
 * writer, NORMAL sync (WAL keeps it crash-safe; a power cut may lose the last commits, never
 * corrupt), foreign keys on, and every pending migration applied in one transaction each.
 * Pass `":memory:"` for a private in-memory database.
 */
export function openSqlite(file: string): SqliteDatabase {
  if (file !== ":memory:") mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
  migrate(db);
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
