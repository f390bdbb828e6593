/** Identity entities: who calls the API and what they own. Times are epoch milliseconds. */

export interface User {
  id: string;
  username: string;
  email: string;
  createdAt: number;
  updatedAt: number;
}

export type WorkspaceRole = "owner" | "member";

export interface Workspace {
  id: string;
  /** Integer id of the workspace, shown as a project's `org_id`. */
  number: number;
  orgname: string;
  name: string;
  email: string;
  createdAt: number;
  updatedAt: number;
}

export interface Membership {
  workspaceId: string;
  userId: string;
  role: WorkspaceRole;
  createdAt: number;
}

export interface Project {
  id: string;
  workspaceId: string;
  name: string;
  createdAt: number;
  updatedAt: number;
}

/** An API key as stored: only the SHA-256 of the key, never the key. */
export interface ApiKeyRecord {
  id: string;
  /** Hex SHA-256 of the key; the store's lookup key. */
  hash: string;
  userId: string;
  label: string;
  createdAt: number;
}

/** Everything a new account starts with, written in one atomic step. */
export interface NewAccount {
  user: User;
  workspace: Omit<Workspace, "number">;
  membership: Membership;
  project: Project;
  apiKey: ApiKeyRecord;
}

/** The authenticated caller of a request. */
export interface Caller {
  userId: string;
}
