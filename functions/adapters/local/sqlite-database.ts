import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";

export type SqliteDatabase = Database.Database;

/**
 * Schema migrations, applied in order; `PRAGMA user_version` records how many have run.
 * Append only: a released migration never changes.
 */
const MIGRATIONS: readonly string[] = [
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
