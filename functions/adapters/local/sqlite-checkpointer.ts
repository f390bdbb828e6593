/**
 * WAL checkpoints of local mode's SQLite file, in a worker thread.
 *
 * In WAL mode every commit appends pages to the `-wal` file, and by default the connection that
 * commits copies them back into the database once the WAL passes 1,000 pages (a checkpoint, with
 * two `fsync`s). better-sqlite3 runs that inside the commit, on the event loop: 20 to 90 ms on a
 * small machine, during which no tenant is served, and a busy tenant (a flood of emits, a deletion of
 * a million events) causes one every few dozen ms. Here the server's connection never checkpoints
 * (`wal_autocheckpoint = 0`); a second connection in a worker thread runs `PASSIVE` checkpoints a
 * few times a second, which copy what no reader still needs and never wait for, or block, the
 * server's reads and writes. Writers start the WAL over once it is all copied, as usual.
 *
 * If the worker cannot start or fails, the server's connection checkpoints again by itself (the
 * SQLite default), so the WAL never grows without bound.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { Logger } from "#core/ports/logger";
import type { SqliteDatabase } from "./sqlite-database.ts";

/** SQLite's own default, restored when the worker is gone. */
const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;

/**
 * The worker, as plain CommonJS so that it runs however the server was started (tsx, a bundle, a
 * test runner): it opens the file, checkpoints every `intervalMs`, and closes on "stop".
 */
const WORKER_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
const timer = setInterval(() => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch (error) {
    // Another connection checkpointing (SQLITE_BUSY) is not a failure: the next tick goes on.
    if (error && error.code !== "SQLITE_BUSY") throw error;
  }
}, workerData.intervalMs);
parentPort.on("message", (message) => {
  if (message !== "stop") return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
parentPort.postMessage("ready");
`;

export interface WalCheckpointerOptions {
  /** How often the worker checkpoints. @default 200 */
  intervalMs?: number;
}

export interface WalCheckpointer {
  /** Stops the worker (and its connection); the server's connection checkpoints by itself again. */
  stop(): Promise<void>;
}

/**
 * Moves the WAL checkpoints of `db` (opened on `file`) to a worker thread. Resolves once the worker
 * has its connection open and `db` no longer checkpoints; never rejects (a worker that cannot start
 * is logged and leaves `db` as it was).
 */
export async function startWalCheckpointer(
  db: SqliteDatabase,
  file: string,
  log: Logger,
  options: WalCheckpointerOptions = {},
): Promise<WalCheckpointer> {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  let worker: Worker;
  try {
    worker = new Worker(WORKER_CODE, {
      eval: true,
      workerData: { driver, file, intervalMs: options.intervalMs ?? 200 },
    });
  } catch (error) {
    log.error("the WAL checkpoint worker could not start; the server checkpoints itself", { error: String(error) });
    return { stop: async () => {} };
  }
  let running = false;
  let stopping = false;
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  const handBack = () => {
    if (!running) return;
    running = false;
    if (db.open) db.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
  };
  worker.on("error", (error) => {
    log.error("the WAL checkpoint worker failed; the server checkpoints itself", { error: String(error) });
    handBack();
  });
  worker.once("exit", handBack);
  const ready = await new Promise<boolean>((resolve) => {
    worker.once("message", (message) => resolve(message === "ready"));
    worker.once("exit", () => resolve(false));
  });
  if (ready && !stopping) {
    // While writes never pause, a PASSIVE checkpoint never catches up with the newest frame, so the
    // WAL grows (about 165 MB while a tenant deletes 500,000 events) until they do; then the next
    // write starts it over from the beginning of the file. The file keeps its size: shrinking it
    // (`journal_size_limit`) is an ftruncate in that write, 160 ms for 300 MB on this machine.
    db.pragma("wal_autocheckpoint = 0");
    running = true;
  }
  // Once started, the server's own handles keep the process alive, never this worker (a start
  // that fails after this point still exits); waiting for it to start or stop holds it.
  worker.unref();
  return {
    async stop() {
      stopping = true;
      handBack();
      worker.ref();
      worker.postMessage("stop");
      await exited;
    },
  };
}
