/**
 * The data dir of local mode: made private to its owner, and held by one server at a time.
 *
 * The hold is an exclusive lock on a dedicated SQLite file, `<data dir>/sluice.lock`, taken at
 * start and kept by an open connection. SQLite locks with `fcntl`, which the kernel drops when the
 * process ends however it ends (a SIGKILL, an out-of-memory kill), so a killed server never leaves
 * a stale lock the way a pid file would. The data file itself is not locked: the CLI commands
 * (`create-user`, `create-key`) write to it while a server runs (decision 64).
 */
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";

/** The lock file in the data dir. */
export const LOCK_FILE = "sluice.lock";

/** Why a file-system or SQLite operation failed, in words, from its error code. */
const REASONS: Record<string, string> = {
  ENOTDIR: "a part of the path is a file, not a folder",
  EEXIST: "it exists and is not a folder",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "the file system is read-only",
  ENOSPC: "the disk is full",
  EDQUOT: "the disk quota is used up",
  EISDIR: "it is a folder, not a file",
  SQLITE_CANTOPEN: "SQLite cannot open it (a folder in its place, or no permission)",
  SQLITE_READONLY: "it is read-only",
  SQLITE_FULL: "the disk is full",
  SQLITE_NOTADB: "it is not a SQLite database",
  SQLITE_CORRUPT: "it is damaged",
};

/** A short reason for `error`: its code in words, else its message. */
export function reasonOf(error: unknown): string {
  const code = String((error as { code?: unknown } | null)?.code ?? "");
  const known = REASONS[code] ?? Object.entries(REASONS).find(([prefix]) => code.startsWith(`${prefix}_`))?.[1];
  const message = error instanceof Error ? error.message : String(error);
  return known ? `${known} (${code})` : message;
}

/**
 * Makes `file` (if absent) and the `-wal` and `-shm` files SQLite keeps beside it readable by their
 * owner only. SQLite gives the files it creates the mode of the database file, so a new data file
 * made 0600 first keeps its companions private too.
 */
export function ownerOnlyFiles(file: string): void {
  if (!existsSync(file)) closeSync(openSync(file, "a", 0o600));
  for (const path of [file, `${file}-wal`, `${file}-shm`]) {
    if (existsSync(path)) chmodSync(path, 0o600);
  }
}

/** Makes the data dir if needed, readable by its owner only; a clear error naming it otherwise. */
export function prepareDataDir(dataDir: string): void {
  try {
    if (existsSync(dataDir)) {
      // An existing folder keeps the mode its owner gave it.
      if (!statSync(dataDir).isDirectory()) throw Object.assign(new Error("not a folder"), { code: "EEXIST" });
      return;
    }
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    // 0700 whatever the umask.
    chmodSync(dataDir, 0o700);
  } catch (error) {
    throw new Error(`cannot use the data dir ${resolve(dataDir)}: ${reasonOf(error)}`, { cause: error });
  }
}

/** An exclusive hold on a data dir; {@link release} ends it (so does the end of the process). */
export interface DataDirLock {
  release(): void;
}

/**
 * Takes the exclusive hold on a data dir, or throws naming the data dir when another server (in
 * this process or another) holds it. The data dir must exist ({@link prepareDataDir}).
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = join(dataDir, LOCK_FILE);
  let db: Database.Database;
  try {
    ownerOnlyFiles(file);
    db = new Database(file, { timeout: 0 });
  } catch (error) {
    throw new Error(`cannot use the data dir ${resolve(dataDir)}: ${reasonOf(error)} on ${LOCK_FILE}`, {
      cause: error,
    });
  }
  try {
    // In exclusive locking mode the lock a write takes is kept until the connection closes.
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE; COMMIT;");
  } catch (error) {
    db.close();
    const code = String((error as { code?: unknown }).code ?? "");
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
      throw new Error(
        `the data dir ${resolve(dataDir)} is in use by another Sluice server (it holds ${LOCK_FILE}): stop that one first, or give this one another SLUICE_DATA_DIR`,
        { cause: error },
      );
    }
    throw new Error(`cannot use the data dir ${resolve(dataDir)}: ${reasonOf(error)} on ${LOCK_FILE}`, {
      cause: error,
    });
  }
  return {
    release() {
      if (db.open) db.close();
    },
  };
}
