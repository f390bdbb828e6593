import type { AppAccountPage, AppAccountRecord, AppAccountStore, PendingConnect } from "#core/ports/app-account-store";
import type { SqliteDatabase } from "./sqlite-database.ts";

interface AccountRow {
  id: string;
  workspace_id: string;
  owner_id: string;
  app: string;
  name: string;
  sealed_credentials: string;
  expires_at: number | null;
  healthy: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  version: number;
}

interface PendingRow {
  state: string;
  workspace_id: string;
  owner_id: string;
  app: string;
  name: string | null;
  sealed_verifier: string;
  redirect_uri: string;
  expires_at: number;
}

function toRecord(row: AccountRow): AppAccountRecord {
  const record: AppAccountRecord = {
    id: row.id,
    workspaceId: row.workspace_id,
    ownerId: row.owner_id,
    app: row.app,
    name: row.name,
    sealedCredentials: row.sealed_credentials,
    healthy: row.healthy === 1,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
  };
  if (row.expires_at !== null) record.expiresAt = row.expires_at;
  if (row.last_error !== null) record.lastError = row.last_error;
  return record;
}

const toRow = (record: AppAccountRecord) => ({
  id: record.id,
  workspaceId: record.workspaceId,
  ownerId: record.ownerId,
  app: record.app,
  name: record.name,
  sealedCredentials: record.sealedCredentials,
  expiresAt: record.expiresAt ?? null,
  healthy: record.healthy ? 1 : 0,
  lastError: record.lastError ?? null,
  createdAt: record.createdAt,
  updatedAt: record.updatedAt,
  version: record.version,
});

function toPending(row: PendingRow): PendingConnect {
  const pending: PendingConnect = {
    state: row.state,
    workspaceId: row.workspace_id,
    ownerId: row.owner_id,
    app: row.app,
    sealedVerifier: row.sealed_verifier,
    redirectUri: row.redirect_uri,
    expiresAt: row.expires_at,
  };
  if (row.name !== null) pending.name = row.name;
  return pending;
}

/** `AppAccountStore` on the local SQLite file; each call is one statement or transaction. */
export class SqliteAppAccountStore implements AppAccountStore {
  private readonly statements;
  private readonly take;

  constructor(db: SqliteDatabase) {
    const statements = {
      insert: db.prepare(
        `INSERT INTO app_accounts (id, workspace_id, owner_id, app, name, sealed_credentials, expires_at, healthy,
           last_error, created_at, updated_at, version)
         VALUES (@id, @workspaceId, @ownerId, @app, @name, @sealedCredentials, @expiresAt, @healthy, @lastError,
           @createdAt, @updatedAt, @version)`,
      ),
      byId: db.prepare<[string], AccountRow>("SELECT * FROM app_accounts WHERE id = ?"),
      page: db.prepare<{ workspace: string; after: string; limit: number }, AccountRow>(
        "SELECT * FROM app_accounts WHERE workspace_id = @workspace AND id > @after ORDER BY id LIMIT @limit",
      ),
      pageOfApp: db.prepare<{ workspace: string; app: string; after: string; limit: number }, AccountRow>(
        "SELECT * FROM app_accounts WHERE workspace_id = @workspace AND app = @app AND id > @after ORDER BY id LIMIT @limit",
      ),
      count: db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM app_accounts WHERE workspace_id = ?"),
      countOfApp: db.prepare<[string, string], { n: number }>(
        "SELECT COUNT(*) AS n FROM app_accounts WHERE workspace_id = ? AND app = ?",
      ),
      update: db.prepare(
        `UPDATE app_accounts SET name = @name, sealed_credentials = @sealedCredentials, expires_at = @expiresAt,
           healthy = @healthy, last_error = @lastError, updated_at = @updatedAt, version = @version
         WHERE id = @id AND version = @expected`,
      ),
      delete: db.prepare<[string]>("DELETE FROM app_accounts WHERE id = ?"),
      expiring: db.prepare<[number, number], AccountRow>(
        `SELECT * FROM app_accounts WHERE expires_at IS NOT NULL AND healthy = 1 AND expires_at < ?
         ORDER BY expires_at, id LIMIT ?`,
      ),
      insertPending: db.prepare(
        `INSERT INTO pending_connects (state, workspace_id, owner_id, app, name, sealed_verifier, redirect_uri, expires_at)
         VALUES (@state, @workspaceId, @ownerId, @app, @name, @sealedVerifier, @redirectUri, @expiresAt)`,
      ),
      pending: db.prepare<[string], PendingRow>("SELECT * FROM pending_connects WHERE state = ?"),
      deletePending: db.prepare<[string]>("DELETE FROM pending_connects WHERE state = ?"),
      sweepPending: db.prepare<[number]>("DELETE FROM pending_connects WHERE expires_at <= ?"),
    };
    this.statements = statements;
    // Read and delete in one transaction: a state is used once, even by two callbacks at once.
    this.take = db.transaction((state: string, nowMs: number): PendingConnect | undefined => {
      const row = statements.pending.get(state);
      if (!row) return undefined;
      statements.deletePending.run(state);
      return row.expires_at > nowMs ? toPending(row) : undefined;
    });
  }

  async create(record: AppAccountRecord): Promise<void> {
    this.statements.insert.run(toRow(record));
  }

  async get(id: string): Promise<AppAccountRecord | undefined> {
    const row = this.statements.byId.get(id);
    return row ? toRecord(row) : undefined;
  }

  async list(workspaceId: string, page: { app?: string; after?: string; limit: number }): Promise<AppAccountPage> {
    const args = { workspace: workspaceId, after: page.after ?? "", limit: page.limit + 1 };
    const rows =
      page.app === undefined
        ? this.statements.page.all(args)
        : this.statements.pageOfApp.all({ ...args, app: page.app });
    const accounts = rows.slice(0, page.limit).map(toRecord);
    const last = accounts.at(-1);
    return rows.length > page.limit && last ? { accounts, nextAfter: last.id } : { accounts };
  }

  async count(workspaceId: string, app?: string): Promise<number> {
    const row =
      app === undefined ? this.statements.count.get(workspaceId) : this.statements.countOfApp.get(workspaceId, app);
    return row?.n ?? 0;
  }

  async update(record: AppAccountRecord, expectedVersion: number): Promise<boolean> {
    return this.statements.update.run({ ...toRow(record), expected: expectedVersion }).changes === 1;
  }

  async delete(id: string): Promise<boolean> {
    return this.statements.delete.run(id).changes === 1;
  }

  async listExpiring(beforeMs: number, limit: number): Promise<AppAccountRecord[]> {
    return this.statements.expiring.all(beforeMs, limit).map(toRecord);
  }

  async savePendingConnect(pending: PendingConnect, nowMs: number): Promise<void> {
    // Expired authorizations are swept as new ones start, so abandoned ones do not pile up.
    this.statements.sweepPending.run(nowMs);
    this.statements.insertPending.run({ ...pending, name: pending.name ?? null });
  }

  async takePendingConnect(state: string, nowMs: number): Promise<PendingConnect | undefined> {
    return this.take(state, nowMs);
  }
}
