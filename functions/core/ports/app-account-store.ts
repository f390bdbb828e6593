/**
 * Connected accounts (`apn_`): the credentials of one workspace for one app, which components
 * receive as `this.<appProp>.$auth` (docs/accounts.md). Credentials are stored sealed
 * (`Secrets.seal` of their JSON): an adapter never sees them in clear.
 */
export interface AppAccountRecord {
  /** `apn_` id; ids sort by creation time. */
  id: string;
  workspaceId: string;
  /** The `u_` id of the user who connected it. */
  ownerId: string;
  /** The app's `name_slug` (what components write in `app:`). */
  app: string;
  /** Shown in lists; unique only by convention. */
  name: string;
  /**
   * `Secrets.seal` of the JSON object of the credential fields: the app's `fields` for key apps;
   * `oauth_access_token`, `oauth_refresh_token`, `oauth_uid` and the app's other fields for OAuth.
   */
  sealedCredentials: string;
  /** OAuth: epoch ms when the access token expires; absent for key apps and tokens that never do. */
  expiresAt?: number;
  /** False after a refused refresh or a failed health check; true after a good one. */
  healthy: boolean;
  /** Why the account is unhealthy, free of secrets; absent when healthy. */
  lastError?: string;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms of the last change of the credentials, name or health. */
  updatedAt: number;
  /** 1 when created, one more on every update: `update` is conditional on it. */
  version: number;
}

/** One page of a workspace's accounts, by id. */
export interface AppAccountPage {
  accounts: AppAccountRecord[];
  /** The last id of this page when more may follow; absent on the last page. */
  nextAfter?: string;
}

/**
 * An OAuth authorization in progress (`POST /v1/accounts/connect` until the provider redirects
 * back to the callback), found by its `state`, used once, and gone after `expiresAt`.
 */
export interface PendingConnect {
  /** The random `state` parameter sent to the provider (also the key). */
  state: string;
  workspaceId: string;
  ownerId: string;
  /** The app's `name_slug`. */
  app: string;
  /** The account's name to give, when the caller chose one. */
  name?: string;
  /** `Secrets.seal` of the PKCE code verifier. */
  sealedVerifier: string;
  /** The redirect URI sent to the provider (the token request repeats it). */
  redirectUri: string;
  /** Epoch ms. */
  expiresAt: number;
}

/** Adapters: `SqliteAppAccountStore`, `DynamoDbAppAccountStore`. */
export interface AppAccountStore {
  /** Stores a new account. @throws when the id exists. */
  create(record: AppAccountRecord): Promise<void>;
  get(id: string): Promise<AppAccountRecord | undefined>;
  /** The workspace's accounts with ids after `after`, by id, at most `limit`, of `app` only when given. */
  list(workspaceId: string, page: { app?: string; after?: string; limit: number }): Promise<AppAccountPage>;
  /** How many accounts the workspace has (of `app` only, when given): a list's `total_count`. */
  count(workspaceId: string, app?: string): Promise<number>;
  /**
   * Replaces the account with `record` (whose `version` must be `expectedVersion + 1`) when the
   * stored one has `expectedVersion`; false (nothing written) when it has another or is gone.
   */
  update(record: AppAccountRecord, expectedVersion: number): Promise<boolean>;
  /** Removes the account; false when there was none. */
  delete(id: string): Promise<boolean>;
  /**
   * Healthy accounts of every workspace whose access token expires before `beforeMs` (those with
   * an `expiresAt`), soonest first, at most `limit`: the background refresh's work
   * (docs/accounts.md "Refresh"). An unhealthy account waits for a use or a new connection.
   */
  listExpiring(beforeMs: number, limit: number): Promise<AppAccountRecord[]>;
  /** Stores an authorization in progress (and may drop those expired at `nowMs`). */
  savePendingConnect(pending: PendingConnect, nowMs: number): Promise<void>;
  /** Returns and removes the authorization of `state`: once only; undefined when absent or expired at `nowMs`. */
  takePendingConnect(state: string, nowMs: number): Promise<PendingConnect | undefined>;
}
