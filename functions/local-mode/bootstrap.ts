import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteIdentityStore } from "#adapters/local/sqlite-identity-store";
import type { LocalConfig } from "#config/env";
import { addApiKey, type CreateAccountInput, type CreatedAccount, createAccount } from "#core/accounts";
import { hashApiKey } from "#core/api-keys";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { DATABASE_FILE } from "#local-mode/composition";

export const API_KEY_FILE = "api-key";

export type BootstrapOutcome =
  /** First start: a new account and a generated key, to be shown once. */
  | { kind: "created"; apiKey: string; keyFile: string }
  /** The key comes from SLUICE_API_KEY (created or already known). */
  | { kind: "from-env"; keyFile: string }
  /** A later start: the key was shown on the first start and is in the key file. */
  | { kind: "existing"; keyFile: string; keyFileExists: boolean };

/** Saves a key to `<data dir>/api-key`, readable by its owner only; returns the file's path. */
export function saveApiKey(dataDir: string, key: string): string {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, API_KEY_FILE);
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  // `mode` applies only when the file is created; an older file keeps its mode otherwise.
  chmodSync(file, 0o600);
  return file;
}

/**
 * Makes sure local mode has its first user, workspace, project and API key. The key is written
 * to `<data dir>/api-key` (mode 600). With SLUICE_API_KEY set, that key is used: created with the
 * account, or added to the existing user on a later start.
 */
export async function ensureFirstAccount(deps: Deps, config: LocalConfig): Promise<BootstrapOutcome> {
  const keyFile = join(config.dataDir, API_KEY_FILE);
  const existing = await deps.identity.findUserByUsername(config.username);

  if (!existing) {
    const account = await createAccount(deps, {
      username: config.username,
      email: config.email,
      apiKey: config.apiKey,
    });
    saveApiKey(config.dataDir, account.apiKey);
    deps.log.info("created the first account", { user_id: account.user.id, workspace_id: account.workspace.id });
    return config.apiKey ? { kind: "from-env", keyFile } : { kind: "created", apiKey: account.apiKey, keyFile };
  }
  if (config.apiKey) {
    if (!(await deps.identity.findApiKeyByHash(hashApiKey(config.apiKey)))) {
      await addApiKey(deps, { userId: existing.id, label: "SLUICE_API_KEY", apiKey: config.apiKey });
    }
    saveApiKey(config.dataDir, config.apiKey);
    return { kind: "from-env", keyFile };
  }
  const keyFileExists = existsSync(keyFile);
  // A key file an older version left readable by others becomes its owner's only.
  if (keyFileExists) chmodSync(keyFile, 0o600);
  return { kind: "existing", keyFile, keyFileExists };
}

type IdentityDeps = Pick<Deps, "identity" | "clock" | "ids">;

/**
 * Runs `work` on the identity tables of a data dir's file, and only those, so a command can run
 * while local mode serves from the same data dir in another process (SQLite in WAL mode; a write
 * waits up to the busy timeout for the server's) without touching the server's queues, outbox or
 * sandboxes. Refuses a data dir that holds no data yet: a mistyped SLUICE_DATA_DIR would otherwise
 * make a new, empty one.
 */
async function withLocalIdentity<T>(dataDir: string, work: (deps: IdentityDeps) => Promise<T>): Promise<T> {
  const file = join(dataDir, DATABASE_FILE);
  if (!existsSync(file))
    throw new Error(`no local data in ${dataDir}: run 'npm start' once first (or set SLUICE_DATA_DIR)`);
  const db = openSqlite(file);
  try {
    return await work({
      identity: new SqliteIdentityStore(db),
      clock: systemClock,
      ids: randomIdGenerator(systemClock),
    });
  } finally {
    db.close();
  }
}

/**
 * `sluice create-user` in local mode: another user with their own workspace, default project and
 * API key (the key is returned, not saved: `<data dir>/api-key` stays the first user's). A taken
 * username is refused (`conflict`).
 */
export function createLocalUser(dataDir: string, input: CreateAccountInput): Promise<CreatedAccount> {
  return withLocalIdentity(dataDir, (deps) => createAccount(deps, input));
}

/**
 * `sluice create-key`: a new API key for the local user `username`, saved to `<data dir>/api-key`
 * (the lost-key path). Returns the key and the file it was saved to.
 */
export function createLocalKey(dataDir: string, username: string): Promise<{ key: string; file: string }> {
  return withLocalIdentity(dataDir, async (deps) => {
    const user = await deps.identity.findUserByUsername(username);
    if (!user) throw new Error(`no local user ${username}: run 'npm start' once first`);
    const key = await addApiKey(deps, { userId: user.id, label: "create-key" });
    return { key, file: saveApiKey(dataDir, key) };
  });
}
