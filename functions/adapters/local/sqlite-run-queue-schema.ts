/**
 * Table of `SqliteRunQueue`, appended to `MIGRATIONS` in sqlite-database.ts (append only, like
 * every migration there: released text never changes).
 *
 * One row per queued run: `seq` is the enqueue order, `job` the `RunJob` as JSON. A row lives from
 * the enqueue until its run has been applied. `seq` is the rowid, without AUTOINCREMENT (which costs
 * a page write per commit): a new row's seq is above every row present, so the rows a stopped
 * process left are those up to the largest seq when the queue is made, and a seq handed out again
 * (after the largest row went) is above every left row still to be read.
 */
export const RUN_QUEUE_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE run_jobs (
    seq INTEGER PRIMARY KEY,
    job TEXT NOT NULL
  );
  `,
];

/**
 * `attempts`: how often the job failed on Sluice's side, or was started by a process that then
 * died before its run ended (counted when a process starts a job a previous one left). A job read
 * back with three is moved to `run_jobs_set_aside` instead of being run again, with `last_error`
 * (the last failure's message, NULL when every attempt died with its process).
 */
export const RUN_QUEUE_ATTEMPT_MIGRATIONS: readonly string[] = [
  `
  ALTER TABLE run_jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE run_jobs ADD COLUMN last_error TEXT;
  CREATE TABLE run_jobs_set_aside (
    id INTEGER PRIMARY KEY,
    job TEXT NOT NULL,
    target TEXT,
    attempts INTEGER NOT NULL,
    last_error TEXT,
    set_aside_at INTEGER NOT NULL
  );
  `,
];
