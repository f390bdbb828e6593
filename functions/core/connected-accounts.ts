/**
 * Creating a connected account: the one way a record comes to exist, whether from
 * `POST /v1/accounts` (key apps) or from an OAuth callback. Pure: the store, the key, the clock
 * and ids come through `deps`.
 */
import { type AccountCredentials, sealCredentials } from "./account-credentials.ts";
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
