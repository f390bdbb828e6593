/**
 * Creating a connected account: the one way a record comes to exist, whether from
 * `POST /v1/accounts` (key apps) or from an OAuth callback. Pure: the store, the key, the clock
 * and ids come through `deps`.
 */
import { type AccountCredentials, sealCredentials } from "./account-credentials.ts";
import { conflict, invalid } from "./errors.ts";
import { requireDisplayableName } from "./names.ts";
import type { AppAccountRecord } from "./ports/app-account-store.ts";
import type { AppDefinition } from "./ports/app-catalog.ts";
import type { Deps } from "./ports/deps.ts";

export interface NewConnectedAccount {
  workspaceId: string;
  ownerId: string;
  app: AppDefinition;
  /** Default: the app's display name. */
  name?: string | undefined;
  credentials: AccountCredentials;
  /** OAuth: epoch ms when the access token expires. */
  expiresAt?: number | undefined;
  /** What a test request run before creating found (the OAuth callback runs one). @default healthy */
  health?: { healthy: boolean; lastError?: string | undefined } | undefined;
}

/** Seals the credentials and stores a new account (version 1), healthy unless `health` says otherwise. */
export async function createConnectedAccount(
  deps: Pick<Deps, "appAccounts" | "secrets" | "clock" | "ids">,
  input: NewConnectedAccount,
): Promise<AppAccountRecord> {
  await requireRoomForAccount(deps, input.workspaceId);
  const now = deps.clock.nowMs();
  const record: AppAccountRecord = {
    id: deps.ids.newId("account"),
    workspaceId: input.workspaceId,
    ownerId: input.ownerId,
    app: input.app.nameSlug,
    name: input.name ?? input.app.name,
    sealedCredentials: await sealCredentials(deps, input.credentials),
    healthy: input.health?.healthy ?? true,
    createdAt: now,
    updatedAt: now,
    version: 1,
  };
  if (input.expiresAt !== undefined) record.expiresAt = input.expiresAt;
  if (input.health?.healthy === false && input.health.lastError !== undefined)
    record.lastError = input.health.lastError;
  await deps.appAccounts.create(record);
  return record;
}

/** Characters of an account's name. */
export const ACCOUNT_NAME_MAX_CHARS = 200;

/** Accounts one workspace may have, however they are made (a key, or an OAuth connection). */
export const ACCOUNTS_PER_WORKSPACE = 1000;

/** 409 when workspace `workspaceId` has {@link ACCOUNTS_PER_WORKSPACE} accounts already. */
export async function requireRoomForAccount(deps: Pick<Deps, "appAccounts">, workspaceId: string): Promise<void> {
  const count = await deps.appAccounts.count(workspaceId);
  if (count >= ACCOUNTS_PER_WORKSPACE) {
    throw conflict(`the workspace has ${count} accounts, its limit: delete one before connecting another`);
  }
}

/** An account's name as given: not blank, at most {@link ACCOUNT_NAME_MAX_CHARS} characters, displayable. */
export function accountName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  if (name.trim() === "") throw invalid("name", "must not be empty");
  if (name.length > ACCOUNT_NAME_MAX_CHARS)
    throw invalid("name", `must be at most ${ACCOUNT_NAME_MAX_CHARS} characters`);
  return requireDisplayableName("name", name);
}
