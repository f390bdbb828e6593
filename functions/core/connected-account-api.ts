/**
 * The REST use cases of connected accounts (docs/accounts.md "Routes"): creating one for a key
 * app, reading it (its credentials only on request), renaming it or replacing its keys, deleting
 * it (refused while sources or workflows use it, unless forced), and listing a workspace's.
 *
 * Only members of the account's workspace reach it: another tenant's id is "not found", as a
 * missing one. Credentials are opened only for `include_credentials=1` and never appear in an
 * error message: errors name the field, never its value.
 */
import { requireAppAccount, requireWorkspace } from "./access.ts";
import { type AccountCredentials, currentCredentials, sealCredentials } from "./account-credentials.ts";
import { accountUsers } from "./account-users.ts";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { appRefOf } from "./apps.ts";
import { accountName, createConnectedAccount } from "./connected-accounts.ts";
import { conflict, invalid } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { encodeCursor, type PageInfo } from "./pagination.ts";
import type { AppAccountRecord } from "./ports/app-account-store.ts";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";
import { isoTime } from "./time.ts";

/** Characters of one credential value: a PEM certificate chain fits, a file does not. */
export const CREDENTIAL_VALUE_MAX_CHARS = 16 * 1024;
/** UTF-8 bytes of an account's credentials as JSON. */
export const CREDENTIALS_MAX_BYTES = 64 * 1024;
/** How long the access token a read answers stays valid, at least (OAuth refreshes it sooner). */
export const READ_FRESH_FOR_MS = 60_000;
/** Tries of a conditional update that lost a race with another writer, before a 409. */
const UPDATE_ATTEMPTS = 3;

type CredentialValue = string | number | boolean;

/** How an app's field is named (the apps file's rule): a key of another shape is never echoed. */
const FIELD_NAME = /^[A-Za-z0-9_]{1,64}$/;

const OAUTH_CONNECT_HINT = "connect it with POST /v1/accounts/connect (sluice accounts connect <app>)";

/** The metadata of an account (rest-api.md "Account"), without its credentials. */
export function accountView(deps: Pick<Deps, "apps">, account: AppAccountRecord) {
  return {
    id: account.id,
    name: account.name,
    app: appRefOf(deps, account.app),
    created_at: isoTime(account.createdAt),
    updated_at: isoTime(account.updatedAt),
    healthy: account.healthy,
  };
}

export type AccountView = ReturnType<typeof accountView>;

/** The app of a create's `app` (an `app_` id or a `name_slug`), which must take keys. */
function keyApp(deps: Pick<Deps, "apps">, idOrSlug: string): AppDefinition {
  const app = deps.apps.find(idOrSlug);
  if (!app) throw invalid("app", "is not an app of this Sluice's catalog (GET /v1/apps lists them)");
  if (app.authType === "oauth") throw invalid("app", `is an OAuth app: ${OAUTH_CONNECT_HINT}`);
  if (app.authType === "none") throw invalid("app", "needs no account: its components run without one");
  return app;
}

/**
 * The credentials of a key app's account, checked against the app: every key one of its `fields`,
 * every field not marked optional present, values strings (bounded), numbers or booleans.
 */
export function checkKeyCredentials(
  app: AppDefinition,
  credentials: Record<string, CredentialValue> | undefined,
): AccountCredentials {
  if (credentials === undefined)
    throw invalid("credentials", `is required: ${app.name} takes ${app.fields.join(", ")}`);
  const fields = new Set(app.fields);
  for (const [key, value] of Object.entries(credentials)) {
    if (!fields.has(key)) {
      const its = `${app.name} (its fields: ${app.fields.join(", ")})`;
      // A key of another shape may be a value pasted in the wrong place: it is not repeated.
      if (!FIELD_NAME.test(key)) throw invalid("credentials", `has a key that is not a field of ${its}`);
      throw invalid(`credentials.${key}`, `is not a field of ${its}`);
    }
    if (typeof value === "string" && value.length > CREDENTIAL_VALUE_MAX_CHARS) {
      throw invalid(`credentials.${key}`, `must be at most ${CREDENTIAL_VALUE_MAX_CHARS} characters`);
    }
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw invalid(`credentials.${key}`, "must be a finite number");
    }
  }
  const optional = new Set(app.optionalFields ?? []);
  for (const field of app.fields) {
    // Own keys only: `credentials.constructor` is Object's when the body gave none.
    if (!optional.has(field) && (!Object.hasOwn(credentials, field) || credentials[field] === undefined)) {
      throw invalid(`credentials.${field}`, `is required by ${app.name}`);
    }
  }
  if (Buffer.byteLength(JSON.stringify(credentials), "utf8") > CREDENTIALS_MAX_BYTES) {
    throw invalid("credentials", `must be at most ${CREDENTIALS_MAX_BYTES} bytes as JSON`);
  }
  return { ...credentials };
}

export interface CreateKeyAccountInput extends WorkspaceChoice {
  app: string;
  name?: string | undefined;
  credentials?: Record<string, CredentialValue> | undefined;
}

/** `POST /v1/accounts`: a key app's account in the caller's workspace (the chosen one, or their first). */
export async function createKeyAccount(
  deps: Pick<Deps, "appAccounts" | "apps" | "identity" | "secrets" | "clock" | "ids">,
  caller: Caller,
  input: CreateKeyAccountInput,
): Promise<AccountView> {
  const workspace = await workspaceOrDefault(deps, caller, input);
  const app = keyApp(deps, input.app);
  const name = accountName(input.name);
  const credentials = checkKeyCredentials(app, input.credentials);
  const record = await createConnectedAccount(deps, {
    workspaceId: workspace.id,
    ownerId: caller.userId,
    app,
    name,
    credentials,
  });
  return accountView(deps, record);
}

/**
 * `GET /v1/accounts/{id}`: the metadata, and with `includeCredentials` the current credentials
 * (OAuth: fresh for {@link READ_FRESH_FOR_MS} at least, with the catalog's client id) and `expires_at`.
 */
export async function getConnectedAccount(deps: Deps, caller: Caller, id: string, includeCredentials: boolean) {
  const account = await requireAppAccount(deps, caller, id);
  if (!includeCredentials) return accountView(deps, account);
  const credentials = await currentCredentials(deps, account, READ_FRESH_FOR_MS);
  const app = deps.apps.find(account.app);
  // A refresh inside currentCredentials stores a new expiry: the answer shows the stored one.
  const fresh = app?.authType === "oauth" ? ((await deps.appAccounts.get(id)) ?? account) : account;
  return {
    ...accountView(deps, fresh),
    expires_at: fresh.expiresAt === undefined ? null : isoTime(fresh.expiresAt),
    credentials:
      app?.authType === "oauth"
        ? {
            oauth_access_token: credentials.oauth_access_token ?? null,
            oauth_client_id: app.oauth?.clientId ?? null,
            oauth_refresh_token: credentials.oauth_refresh_token ?? null,
            oauth_uid: credentials.oauth_uid ?? null,
            ...Object.fromEntries(app.fields.filter((field) => field in credentials).map((f) => [f, credentials[f]])),
          }
        : credentials,
  };
}

export interface UpdateAccountInput {
  name?: string | undefined;
  credentials?: Record<string, CredentialValue> | undefined;
}

/**
 * `PUT /v1/accounts/{id}`: renames the account and/or replaces a key app's credentials (all of
 * them, checked as at creation). Conditional on the version read: a write that lost a race with
 * another (an OAuth refresh, a health check) is tried again on the new version, then refused (409).
 */
export async function updateConnectedAccount(
  deps: Pick<Deps, "appAccounts" | "apps" | "identity" | "secrets" | "clock">,
  caller: Caller,
  id: string,
  input: UpdateAccountInput,
): Promise<AccountView> {
  const name = accountName(input.name);
  let account = await requireAppAccount(deps, caller, id);
  let sealed: string | undefined;
  if (input.credentials !== undefined) {
    const app = deps.apps.find(account.app);
    if (app?.authType === "oauth") {
      throw invalid("credentials", `of an OAuth app come from its provider: ${OAUTH_CONNECT_HINT} again`);
    }
    if (app?.authType !== "keys") {
      throw invalid("credentials", `cannot be set: ${account.app} is not a key app of this Sluice's catalog`);
    }
    sealed = await sealCredentials(deps, checkKeyCredentials(app, input.credentials));
  }
  if (name === undefined && sealed === undefined) return accountView(deps, account);
  for (let attempt = 1; ; attempt++) {
    const next: AppAccountRecord = {
      ...account,
      name: name ?? account.name,
      sealedCredentials: sealed ?? account.sealedCredentials,
      updatedAt: deps.clock.nowMs(),
      version: account.version + 1,
    };
    // New keys are presumed good until a health check says otherwise.
    if (sealed !== undefined) {
      next.healthy = true;
      delete next.lastError;
    }
    if (await deps.appAccounts.update(next, account.version)) return accountView(deps, next);
    if (attempt === UPDATE_ATTEMPTS) throw conflict("the account was changed by another request meanwhile: try again");
    account = await requireAppAccount(deps, caller, id);
  }
}

/**
 * `DELETE /v1/accounts/{id}`: refused (409 naming them) while sources or workflows name the
 * account in their props, unless `force`; then they find no account on their next run.
 */
export async function deleteConnectedAccount(
  deps: Pick<Deps, "appAccounts" | "identity" | "sources" | "workflows">,
  caller: Caller,
  id: string,
  force: boolean,
): Promise<{ id: string; deleted: true }> {
  const account = await requireAppAccount(deps, caller, id);
  if (!force) {
    const users = await accountUsers(deps, account.workspaceId, account.id);
    const named = [
      ...users.sources.map((source) => `source ${source.id} (${source.name})`),
      ...users.workflows.map((workflow) => `workflow ${workflow.id} (${workflow.name})`),
    ];
    if (named.length > 0) {
      throw conflict(
        `account ${account.id} is used by ${named.join(", ")}: configure them without it, or delete with force=true`,
      );
    }
  }
  await deps.appAccounts.delete(account.id);
  return { id: account.id, deleted: true };
}

/** A page of a workspace's accounts by id (oldest first), of one app when `app` is given. */
async function accountPage(
  deps: Pick<Deps, "appAccounts" | "apps">,
  workspaceId: string,
  page: { limit: number; after?: string | undefined; app?: string | undefined },
): Promise<{ page_info: PageInfo; accounts: AppAccountRecord[] }> {
  // An app the catalog no longer has still filters by the slug its accounts keep.
  const app = page.app === undefined ? undefined : (deps.apps.find(page.app)?.nameSlug ?? page.app);
  const query = {
    limit: page.limit,
    ...(page.after === undefined ? {} : { after: page.after }),
    ...(app === undefined ? {} : { app }),
  };
  const [found, total] = await Promise.all([
    deps.appAccounts.list(workspaceId, query),
    deps.appAccounts.count(workspaceId, app),
  ]);
  const first = found.accounts[0];
  return {
    page_info: {
      total_count: total,
      count: found.accounts.length,
      start_cursor: first ? encodeCursor(first.id) : null,
      end_cursor: found.nextAfter === undefined ? null : encodeCursor(found.nextAfter),
    },
    accounts: found.accounts,
  };
}

/** `GET /v1/workspaces/{id}/accounts`: `{id, name}` items, as the spec shows them. */
export async function listWorkspaceAccounts(
  deps: Pick<Deps, "appAccounts" | "apps" | "identity">,
  caller: Caller,
  workspaceId: string,
  page: { limit: number; after?: string | undefined; app?: string | undefined },
) {
  await requireWorkspace(deps, caller, workspaceId);
  const { page_info, accounts } = await accountPage(deps, workspaceId, page);
  return { page_info, data: accounts.map((account) => ({ id: account.id, name: account.name })) };
}

/** `GET /v1/users/me/accounts`: the accounts of the caller's first workspace, with their metadata. */
export async function listUserAccounts(
  deps: Pick<Deps, "appAccounts" | "apps" | "identity">,
  caller: Caller,
  page: { limit: number; after?: string | undefined; app?: string | undefined },
) {
  const workspace = await workspaceOrDefault(deps, caller, {});
  const { page_info, accounts } = await accountPage(deps, workspace.id, page);
  return { page_info, data: accounts.map((account) => accountView(deps, account)) };
}
