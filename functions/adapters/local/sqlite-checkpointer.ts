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
 * While writes never pause (a steady stream of events), a PASSIVE checkpoint never catches up with
 * the newest frame, and SQLite starts the WAL over only once one has. The WAL then grew without
 * bound (224 MB in 17 s at 500 events/s), and every commit wrote into new blocks of the file: on
 * ext4 that is a block allocation and a page zeroed per frame, 11% of the server's main thread
 * (decision 445). So when the worker's checkpoint finds the WAL past `restartPages` with at most
 * `catchUpPages` left to copy, it asks the server's connection to copy that remainder itself,
 * between two of its transactions: no frame can be added meanwhile (that connection is the only
 * writer), so the checkpoint completes and the next commit starts the WAL over at the beginning of
 * the file, which keeps its size and its blocks from then on.
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
// While the server's connection copies the remainder, this one does not checkpoint: two checkpoints
// at once make the second give up (SQLITE_BUSY). It goes on when the server says it is done, or
// after a second without an answer.
let serverCopyingSince = 0;
const timer = setInterval(() => {
  if (serverCopyingSince > 0 && Date.now() - serverCopyingSince < 1000) return;
  serverCopyingSince = 0;
  let done;
  try {
    done = db.pragma("wal_checkpoint(PASSIVE)")[0];
  } catch (error) {
    // Another connection checkpointing (SQLITE_BUSY) is not a failure: the next tick goes on.
    if (error && error.code !== "SQLITE_BUSY") throw error;
    return;
  }
  if (done && done.log >= workerData.restartPages && done.log - done.checkpointed <= workerData.catchUpPages) {
    // The server's copy of the remainder lets its next commit start the WAL over.
    serverCopyingSince = Date.now();
    parentPort.postMessage("catch-up");
  }
}, workerData.intervalMs);
parentPort.on("message", (message) => {
  if (message === "caught-up") serverCopyingSince = 0;
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
  /** A WAL of this many pages or more is started over as soon as a checkpoint nearly caught up. @default 4096 (16 MiB) */
  restartPages?: number;
  /** The most pages the server's connection copies itself so that the WAL can start over. @default 256 (1 MiB) */
  catchUpPages?: number;
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
      workerData: {
        driver,
        file,
        intervalMs: options.intervalMs ?? 200,
        restartPages: options.restartPages ?? 4096,
        catchUpPages: options.catchUpPages ?? 256,
      },
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
  worker.on("message", (message) => {
    if (message === "catch-up") setImmediate(catchUp);
  });
  // Between two transactions of the server's (all of them synchronous): what is left to copy is
  // what was committed since the worker's checkpoint (`catchUpPages` at most, and what one tick
  // adds) and the file's two syncs, a few ms. The worker does not checkpoint meanwhile.
  const catchUp = () => {
    if (!running || !db.open) return;
    try {
      db.pragma("wal_checkpoint(PASSIVE)");
    } catch (error) {
      log.warn("a WAL checkpoint on the server's connection failed", { error: String(error) });
    }
    worker.postMessage("caught-up");
  };
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
