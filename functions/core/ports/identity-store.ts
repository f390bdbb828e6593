import type { ApiKeyRecord, Membership, NewAccount, Project, User, Workspace } from "#core/identity";

/**
 * Users, API keys, workspaces, memberships and projects.
 *
 * Adapters: `SqliteIdentityStore` (local mode) and `DynamoDbIdentityStore` (AWS); both pass
 * `test/contract/identity-store.contract.ts`.
 */
export interface IdentityStore {
  /**
   * Creates a user with a workspace, its membership, a project and an API key, all or nothing.
   * The workspace gets an integer `number` larger than any before it (DynamoDB may skip numbers
   * when a creation fails). Throws `conflict` when the username or the API key is taken.
   */
  createAccount(account: NewAccount): Promise<{ workspace: Workspace }>;
  /** Adds another key for an existing user. Throws `conflict` if the same key exists already. */
  addApiKey(key: ApiKeyRecord): Promise<void>;
  /** The key record whose hash is `hash`, if any. */
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | undefined>;
  getUser(userId: string): Promise<User | undefined>;
  findUserByUsername(username: string): Promise<User | undefined>;
  getWorkspace(workspaceId: string): Promise<Workspace | undefined>;
  getMembership(workspaceId: string, userId: string): Promise<Membership | undefined>;
  /** The workspaces a user belongs to, oldest first. */
  listWorkspacesOfUser(userId: string): Promise<Workspace[]>;
  /** The projects of a workspace, oldest first. */
  listProjects(workspaceId: string): Promise<Project[]>;
}
