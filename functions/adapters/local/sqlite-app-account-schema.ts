/**
 * Connected accounts and OAuth authorizations in progress (`SqliteAppAccountStore`), appended to
 * `MIGRATIONS` in sqlite-database.ts (append only: released text never changes).
 */
export const APP_ACCOUNT_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE app_accounts (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    app TEXT NOT NULL,
    name TEXT NOT NULL,
    sealed_credentials TEXT NOT NULL,
    expires_at INTEGER,
    healthy INTEGER NOT NULL,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL
  );
  CREATE INDEX app_accounts_by_workspace ON app_accounts (workspace_id, id);
  CREATE TABLE pending_connects (
    state TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    app TEXT NOT NULL,
    name TEXT,
    sealed_verifier TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    expires_at INTEGER NOT NULL
  );
  `,
];
