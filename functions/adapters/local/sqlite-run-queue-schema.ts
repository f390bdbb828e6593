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
