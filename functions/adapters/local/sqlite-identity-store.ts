import { conflict } from "#core/errors";
import type { ApiKeyRecord, Membership, NewAccount, Project, User, Workspace, WorkspaceRole } from "#core/identity";
import type { IdentityStore } from "#core/ports/identity-store";
import { type SqliteDatabase, violatedConstraint } from "./sqlite-database.ts";

interface UserRow {
  id: string;
  username: string;
  email: string;
  created_at: number;
  updated_at: number;
}
interface WorkspaceRow {
  number: number;
  id: string;
  orgname: string;
  name: string;
  email: string;
  created_at: number;
  updated_at: number;
}
interface ProjectRow {
  id: string;
  workspace_id: string;
  name: string;
  created_at: number;
  updated_at: number;
}
interface ApiKeyRow {
  hash: string;
  id: string;
  user_id: string;
  label: string;
  created_at: number;
}
interface MembershipRow {
  workspace_id: string;
  user_id: string;
  role: string;
  created_at: number;
}

const toUser = (r: UserRow): User => ({
  id: r.id,
  username: r.username,
  email: r.email,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toWorkspace = (r: WorkspaceRow): Workspace => ({
  id: r.id,
  number: r.number,
  orgname: r.orgname,
  name: r.name,
  email: r.email,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toProject = (r: ProjectRow): Project => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toApiKey = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  hash: r.hash,
  userId: r.user_id,
  label: r.label,
  createdAt: r.created_at,
});

/** `IdentityStore` on the local SQLite file. */
export class SqliteIdentityStore implements IdentityStore {
  private readonly statements;

  constructor(private readonly db: SqliteDatabase) {
    this.statements = {
      insertUser: db.prepare(
        "INSERT INTO users (id, username, email, created_at, updated_at) VALUES (@id, @username, @email, @createdAt, @updatedAt)",
      ),
      insertWorkspace: db.prepare(
        "INSERT INTO workspaces (id, orgname, name, email, created_at, updated_at) VALUES (@id, @orgname, @name, @email, @createdAt, @updatedAt)",
      ),
      insertMembership: db.prepare(
        "INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES (@workspaceId, @userId, @role, @createdAt)",
      ),
      insertProject: db.prepare(
        "INSERT INTO projects (id, workspace_id, name, created_at, updated_at) VALUES (@id, @workspaceId, @name, @createdAt, @updatedAt)",
      ),
      insertApiKey: db.prepare(
        "INSERT INTO api_keys (hash, id, user_id, label, created_at) VALUES (@hash, @id, @userId, @label, @createdAt)",
      ),
      apiKeyByHash: db.prepare<[string], ApiKeyRow>("SELECT * FROM api_keys WHERE hash = ?"),
      userById: db.prepare<[string], UserRow>("SELECT * FROM users WHERE id = ?"),
      userByUsername: db.prepare<[string], UserRow>("SELECT * FROM users WHERE username = ?"),
      workspaceById: db.prepare<[string], WorkspaceRow>("SELECT * FROM workspaces WHERE id = ?"),
      membership: db.prepare<[string, string], MembershipRow>(
        "SELECT * FROM memberships WHERE workspace_id = ? AND user_id = ?",
      ),
      workspacesOfUser: db.prepare<[string], WorkspaceRow>(
        "SELECT w.* FROM memberships m JOIN workspaces w ON w.id = m.workspace_id WHERE m.user_id = ? ORDER BY w.id",
      ),
      projectsOfWorkspace: db.prepare<[string], ProjectRow>(
        "SELECT * FROM projects WHERE workspace_id = ? ORDER BY id",
      ),
    };
  }

  async createAccount(account: NewAccount): Promise<{ workspace: Workspace }> {
    const s = this.statements;
    try {
      const number = this.db.transaction(() => {
        s.insertUser.run(account.user);
        const { lastInsertRowid } = s.insertWorkspace.run(account.workspace);
        s.insertMembership.run(account.membership);
        s.insertProject.run(account.project);
        s.insertApiKey.run(account.apiKey);
        return Number(lastInsertRowid);
      })();
      return { workspace: { ...account.workspace, number } };
    } catch (error) {
      const constraint = violatedConstraint(error);
      if (constraint?.includes("users.username")) throw conflict(`username ${account.user.username} is taken`);
      if (constraint?.includes("api_keys.hash")) throw conflict("this API key exists already");
      throw error;
    }
  }

  async addApiKey(key: ApiKeyRecord): Promise<void> {
    try {
      this.statements.insertApiKey.run(key);
    } catch (error) {
      if (violatedConstraint(error)) throw conflict("this API key exists already");
      throw error;
    }
  }

  async findApiKeyByHash(hash: string) {
    const row = this.statements.apiKeyByHash.get(hash);
    return row && toApiKey(row);
  }

  async getUser(userId: string) {
    const row = this.statements.userById.get(userId);
    return row && toUser(row);
  }

  async findUserByUsername(username: string) {
    const row = this.statements.userByUsername.get(username);
    return row && toUser(row);
  }

  async getWorkspace(workspaceId: string) {
    const row = this.statements.workspaceById.get(workspaceId);
    return row && toWorkspace(row);
  }

  async getMembership(workspaceId: string, userId: string): Promise<Membership | undefined> {
    const row = this.statements.membership.get(workspaceId, userId);
    return (
      row && {
        workspaceId: row.workspace_id,
        userId: row.user_id,
        role: row.role as WorkspaceRole,
        createdAt: row.created_at,
      }
    );
  }

  async listWorkspacesOfUser(userId: string) {
    return this.statements.workspacesOfUser.all(userId).map(toWorkspace);
  }

  async listProjects(workspaceId: string) {
    return this.statements.projectsOfWorkspace.all(workspaceId).map(toProject);
  }
}
