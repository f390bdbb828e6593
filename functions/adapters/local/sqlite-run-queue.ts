import type { Logger } from "#core/ports/logger";
import { jobTarget, RunBusyError, type RunJob, type RunQueue } from "#core/ports/run-queue";
import type { SqliteDatabase } from "./sqlite-database.ts";
import { isDataDirFailure } from "./storage-errors.ts";

export interface SqliteRunQueueOptions {
  /** Runs the job: in local mode the source runner driver (`functions/local-mode/drivers/source-runner.ts`). */
  run(job: RunJob): Promise<unknown>;
  log: Logger;
  /**
   * Jobs running at once; the rest wait in arrival order.
   * @default 64
   */
  concurrency?: number;
  /**
   * A source's (or workflow's: `jobTarget`) fair share of the slots: while jobs of others wait, one
   * with this many jobs running starts no more (its later jobs wait, in order), so a backlog of slow
   * runs, or of runs that wait for each other (a `$.service.db` source runs one at a time), never
   * holds other sources' jobs back. When nothing else waits, it may take every slot.
   * @default a quarter of `concurrency`
   */
  perSourceConcurrency?: number;
  /**
   * Jobs left by a previous process read back at a time, as slots free up (so a long backlog is
   * never all in memory); also the page in which a source's spilled jobs are read back.
   * @default 256
   */
  recoveryPageSize?: number;
  /**
   * Jobs of one source (or workflow) held in memory while they wait, at most. Past it, the
   * source's new jobs are kept only in the file (*spilled*: their row carries the source's id) and
   * read back a page at a time, in order, once its jobs in memory fall to half of it. Bounds the
   * memory of a backlog that grows for as long as a source gets events faster than it runs them.
   * @default 10000
   */
  maxHeldPerSource?: number;
  /**
   * How long the rows of finished jobs may wait to be deleted with the next write (an enqueue's,
   * usually). A crash in between only runs those jobs again.
   * @default 10
   */
  deleteDelayMs?: number;
  /**
   * After a run failed because the data dir could not take a write (a full disk, read-only), runs
   * pause this long, then one run tries again; each failure doubles the pause up to
   * `maxRetryDelayMs`, a success resumes every run.
   * @default 500
   */
  retryDelayMs?: number;
  /** @default 5000 */
  maxRetryDelayMs?: number;
}

interface Held {
  seq: number;
  job: RunJob;
  /** Counted in its source's jobs held in memory (`heldBySource`) until it starts. */
  counted?: boolean;
  /** Left by a previous process: its start counts as an attempt, written before it runs. */
  left?: boolean;
  /** Its start was counted already (a job held for a lease starts again). */
  startCounted?: boolean;
}

/**
 * Attempts after which a queued run is set aside rather than run again: failures on Sluice's side,
 * and starts of a previous process that died before the run ended (a job that kills its process).
 */
export const MAX_QUEUED_RUN_ATTEMPTS = 3;

interface PendingInsert {
  job: RunJob;
  json: string;
  /** The job's source when it is spilled (kept only in the file); set by the grouped write. */
  spillTo?: string;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** A FIFO of held jobs that does not shift arrays (which copies them once they grow large). */
class HeldQueue {
  private items: Held[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: Held): void {
    this.items.push(item);
  }

  shift(): Held | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head] as Held;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }
}

/** A row a previous process left. */
interface LeftRow {
  seq: number;
  job: string;
  attempts: number;
  last_error: string | null;
}

function prepare(db: SqliteDatabase) {
  return {
    insert: db.prepare<[string, string | null]>("INSERT INTO run_jobs (job, target) VALUES (?, ?)"),
    spilledPage: db.prepare<[string, number, number], { seq: number; job: string }>(
      "SELECT seq, job FROM run_jobs WHERE target = ? AND seq > ? ORDER BY seq LIMIT ?",
    ),
    remove: db.prepare<[number]>("DELETE FROM run_jobs WHERE seq = ?"),
    lastSeq: db.prepare<[], { seq: number | null }>("SELECT max(seq) AS seq FROM run_jobs"),
    leftPage: db.prepare<[number, number, number], LeftRow>(
      "SELECT seq, job, attempts, last_error FROM run_jobs WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
    ),
    countStart: db.prepare<[number]>("UPDATE run_jobs SET attempts = attempts + 1 WHERE seq = ?"),
    countFailure: db.prepare<[number, string, number]>(
      "UPDATE run_jobs SET attempts = attempts + ?, last_error = ? WHERE seq = ?",
    ),
    setAside: db.prepare<[number, number]>(
      `INSERT INTO run_jobs_set_aside (job, target, attempts, last_error, set_aside_at)
       SELECT job, target, attempts, last_error, ? FROM run_jobs WHERE seq = ?`,
    ),

    count: db.prepare<[], { total: number }>("SELECT count(*) AS total FROM run_jobs"),
  };
}

/**
 * Local mode's run queue, durable: a job is a row in the SQLite file from `enqueue` until its run
 * has been applied, so a hard kill loses no accepted run. Jobs run in this process, in the
 * background, a bounded number at a time, oldest first.
 *
 * - `enqueue` resolves once the row is committed (the HTTP interface answers 2xx only then). Writes
 *   are grouped: the enqueues of one turn of the event loop are written in ONE transaction
 *   (`setImmediate`), with the deletes of jobs finished meanwhile, which costs a few microseconds
 *   per job instead of two commits.
 * - A job is held in memory from its enqueue to its end: its row is never read back while this
 *   process lives. When the run has been applied, its row is deleted with the next grouped write
 *   (within `deleteDelayMs`). Past `maxHeldPerSource` waiting jobs of one source, its new jobs are
 *   *spilled*: kept only in their rows (marked with its id) and read back in order, a page at a
 *   time, as its jobs in memory run; so a backlog that keeps growing costs disk, not memory.
 * - {@link start} re-runs, before any new job, every job a previous process left (it died, or
 *   stopped before they ran), reading them back a page at a time. A job whose run had been applied
 *   but whose row was not yet deleted runs a second time: runs are at least once.
 * - A run that fails because the data dir cannot take a write (a full disk, a read-only file:
 *   `isDataDirFailure`) is not given up: runs pause, then that run alone is tried again, with a
 *   growing pause, until one succeeds and every run resumes (the jobs stay in memory and in the
 *   file meanwhile). So what was accepted is stored once space is back, without a restart.
 * - A run that fails otherwise (Sluice's store, not the component: the component's errors are part
 *   of its result) is logged and its row kept, so it runs again at the next start. Its row counts
 *   the failure; a job left by a previous process counts its start before it runs, so a job that
 *   kills the process counts too. One read back with {@link MAX_QUEUED_RUN_ATTEMPTS} is moved to
 *   `run_jobs_set_aside` (logged) rather than run again: a poison job does not repeat its outside
 *   effects at every start, and is kept for the operator (docs/operations.md).
 */
export class SqliteRunQueue implements RunQueue {
  private readonly statements: ReturnType<typeof prepare>;
  /** One grouped write: the deletes, then the inserts (their seqs, in order). */
  private readonly write;
  private readonly concurrency: number;
  private readonly recoveryPageSize: number;
  private readonly waiting = new HeldQueue();
  private readonly perSourceConcurrency: number;
  /** Jobs running per source. */
  private readonly runningBySource = new Map<string, number>();
  /** Jobs taken from the line while their source had no room, per source, in order. */
  private readonly deferred = new Map<string, HeldQueue>();
  private deferredCount = 0;
  /** Deferred jobs whose source has room again: they start before the line. */
  private freed: Held[] = [];
  /** Jobs whose run another runner holds (`RunBusyError`), waiting for its lease to end; their rows stay. */
  private readonly held = new Map<number, NodeJS.Timeout>();
  /** Jobs whose run failed for the data dir, oldest first: they run again before any other. */
  private retrying: Held[] = [];
  /** While set, no job starts (the data dir failed a run). */
  private pauseTimer: NodeJS.Timeout | undefined;
  /** After a pause, one job runs alone until one succeeds. */
  private probing = false;
  /** The job that runs alone to try the data dir; undefined before it starts. */
  private probe: number | undefined;
  private readonly retryDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private nextRetryDelayMs: number;
  private running = 0;
  private readonly idle = new Set<() => void>();
  private pendingInserts: PendingInsert[] = [];
  private pendingDeletes: number[] = [];
  private flushSoon = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly deleteDelayMs: number;
  /** Rows up to this seq were left by a previous process; those after `recoveredTo` are not read yet. */
  private readonly leftUpTo: number;
  private recoveredTo = 0;
  private recovering: Held[] = [];
  private leftToRead: boolean;
  private readonly maxHeldPerSource: number;
  /** Jobs waiting in memory per source (in the line or deferred), not counting those of a previous process. */
  private readonly heldBySource = new Map<string, number>();
  /** Sources with spilled jobs: the seq after which their next spilled row is. */
  private readonly spills = new Map<string, { readAfter: number }>();
  private spilledCount = 0;
  private started = false;
  private stopped = false;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly options: SqliteRunQueueOptions,
  ) {
    this.statements = prepare(db);
    const s = this.statements;
    this.write = db.transaction((deletes: number[], inserts: PendingInsert[]) => {
      for (const seq of deletes) s.remove.run(seq);
      return inserts.map((insert) => Number(s.insert.run(insert.json, insert.spillTo ?? null).lastInsertRowid));
    });
    this.concurrency = Math.max(1, options.concurrency ?? 64);
    this.perSourceConcurrency = Math.max(1, options.perSourceConcurrency ?? Math.floor(this.concurrency / 4));
    this.recoveryPageSize = Math.max(1, options.recoveryPageSize ?? 256);
    this.maxHeldPerSource = Math.max(2, options.maxHeldPerSource ?? 10_000);
    this.deleteDelayMs = Math.max(0, options.deleteDelayMs ?? 10);
    this.retryDelayMs = Math.max(1, options.retryDelayMs ?? 500);
    this.maxRetryDelayMs = Math.max(this.retryDelayMs, options.maxRetryDelayMs ?? 5_000);
    this.nextRetryDelayMs = this.retryDelayMs;
    this.leftUpTo = this.statements.lastSeq.get()?.seq ?? 0;
    this.leftToRead = this.leftUpTo > 0;
  }

  enqueue(job: RunJob): Promise<void> {
    const json = JSON.stringify(job);
    if (this.stopped) {
      // Closing: written at once (the file closes next), run at the next start.
      try {
        this.statements.insert.run(json, null);
        return Promise.resolve();
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return new Promise<void>((resolve, reject) => {
      this.pendingInserts.push({ job, json, resolve, reject });
      this.scheduleFlush(true);
    });
  }

  /**
   * Starts running jobs: first those a previous process left, then those enqueued since this queue
   * was made (held until now). Local mode calls it at start, once the outbox has been routed.
   */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (this.leftToRead) this.options.log.info("resuming source runs left by a previous process");
    this.pump();
  }

  /**
   * Starts no more jobs and writes what is pending at once. Jobs running go on; a row whose run
   * ends after the database is closed stays, and that job runs again at the next start.
   */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.pauseTimer);
    // Their rows stay: they run at the next start.
    for (const timer of this.held.values()) clearTimeout(timer);
    this.held.clear();
    this.flush();
  }

  /** Jobs waiting in memory or running (not counting those of a previous process not read back yet). */
  get pending(): number {
    return (
      this.waiting.length +
      this.recovering.length +
      this.retrying.length +
      this.deferredCount +
      this.freed.length +
      this.held.size +
      this.running +
      this.spilledCount
    );
  }

  /** Rows in the queue: jobs waiting, running, or left to run again at the next start. */
  size(): number {
    return this.statements.count.get()?.total ?? 0;
  }

  /** Resolves when no started job is queued or running, or after `timeoutMs`; at once when not started. */
  drain(timeoutMs: number): Promise<void> {
    if (!this.started || this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.idle.add(done);
    });
  }

  private isIdle(): boolean {
    return this.pending === 0 && !this.leftToRead && this.pendingInserts.length === 0;
  }

  /** Enqueues are written after this turn; deletes may wait up to `deleteDelayMs` for them. */
  private scheduleFlush(urgent: boolean): void {
    if (urgent) {
      if (this.flushSoon) return;
      this.flushSoon = true;
      setImmediate(() => this.flush());
      return;
    }
    if (this.flushSoon || this.flushTimer) return;
    this.flushTimer = setTimeout(() => this.flush(), this.deleteDelayMs);
    this.flushTimer.unref();
  }

  /** Writes every pending insert and delete in one transaction, then hands the new jobs on. */
  private flush(): void {
    this.flushSoon = false;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const inserts = this.pendingInserts;
    const deletes = this.pendingDeletes;
    if (inserts.length === 0 && deletes.length === 0) return;
    this.pendingInserts = [];
    this.pendingDeletes = [];
    this.decideSpills(inserts);
    let seqs: number[];
    try {
      seqs = this.write(deletes, inserts);
    } catch (error) {
      for (const insert of inserts) insert.reject(error);
      if (this.db.open) this.deleteAlone(deletes);
      return;
    }
    inserts.forEach((insert, index) => {
      const seq = seqs[index] as number;
      if (insert.spillTo) this.spilled(insert.spillTo, seq);
      else this.hold({ seq, job: insert.job });
      insert.resolve();
    });
    if (inserts.length > 0) this.pump();
  }

  /**
   * Marks the inserts of a source that is spilling, or that would pass `maxHeldPerSource` with
   * them, to be kept only in the file: once a source spills, all its new jobs do until its spilled
   * rows are read back, so its jobs keep their order.
   */
  private decideSpills(inserts: PendingInsert[]): void {
    let adding: Map<string, number> | undefined;
    for (const insert of inserts) {
      const target = jobTarget(insert.job);
      const held = (this.heldBySource.get(target) ?? 0) + (adding?.get(target) ?? 0);
      if (this.spills.has(target) || held >= this.maxHeldPerSource) {
        insert.spillTo = target;
        continue;
      }
      adding ??= new Map();
      adding.set(target, (adding.get(target) ?? 0) + 1);
    }
  }

  private spilled(target: string, seq: number): void {
    if (!this.spills.has(target)) {
      // Every earlier spilled row of this source was read back already (their seqs are lower).
      this.spills.set(target, { readAfter: seq - 1 });
      this.options.log.warn("a source's queued runs are kept in the data file only until it catches up", {
        target_id: target,
        held_in_memory: this.heldBySource.get(target) ?? 0,
      });
    }
    this.spilledCount++;
  }

  /** A job waits in memory, in the line. */
  private hold(held: Held): void {
    const target = jobTarget(held.job);
    this.heldBySource.set(target, (this.heldBySource.get(target) ?? 0) + 1);
    held.counted = true;
    this.waiting.push(held);
  }

  /**
   * A job of `target` left memory to run: once the source's jobs in memory are down to half the
   * limit, its next spilled page is read back to the end of the line (after every job of it there).
   */
  private released(target: string): void {
    const left = (this.heldBySource.get(target) ?? 1) - 1;
    if (left > 0) this.heldBySource.set(target, left);
    else this.heldBySource.delete(target);
    const spill = this.spills.get(target);
    if (!spill || left > this.maxHeldPerSource / 2) return;
    const pageSize = Math.min(this.recoveryPageSize, Math.ceil(this.maxHeldPerSource / 2));
    let rows: { seq: number; job: string }[];
    try {
      rows = this.statements.spilledPage.all(target, spill.readAfter, pageSize);
    } catch (error) {
      // Tried again when its next job starts; at worst they run at the next start.
      this.options.log.error("queued source runs kept in the data file could not be read back", {
        target_id: target,
        error: String(error),
      });
      return;
    }
    if (rows.length < pageSize) this.spills.delete(target);
    for (const row of rows) {
      spill.readAfter = row.seq;
      this.spilledCount--;
      const held = this.heldOf(row);
      if (held) this.hold(held);
    }
  }

  /** Deletes finished jobs' rows when the grouped write failed for an insert. */
  private deleteAlone(deletes: number[]): void {
    try {
      this.db.transaction(() => {
        for (const seq of deletes) this.statements.remove.run(seq);
      })();
    } catch (error) {
      this.options.log.error(
        "finished source runs could not be removed from the run queue; they run again at the next start",
        {
          error: String(error),
        },
      );
    }
  }

  private pump(): void {
    if (!this.started || this.stopped || this.pauseTimer) return;
    const limit = this.probing ? 1 : this.concurrency;
    while (this.running < limit) {
      const next = this.next();
      if (!next) break;
      if (this.probing) this.probe = next.seq;
      if (next.left && !next.startCounted) this.countStart(next);
      this.running++;
      const sourceId = jobTarget(next.job);
      this.runningBySource.set(sourceId, (this.runningBySource.get(sourceId) ?? 0) + 1);
      if (next.counted) {
        next.counted = false;
        this.released(sourceId);
      }
      this.options
        .run(next.job)
        .then(
          () => this.succeeded(next.seq),
          (error: unknown) => this.failed(next, error),
        )
        .finally(() => {
          this.running--;
          this.endedOne(sourceId);
          this.pump();
          if (this.isIdle()) for (const done of [...this.idle]) done();
        });
    }
  }

  /**
   * The next job: those to try again first, then deferred ones whose source is under its share
   * again, then those left by a previous process, then the new ones. A job whose source has its
   * share running is deferred; deferred jobs take a slot only when no other job waits.
   */
  private next(): Held | undefined {
    const early = this.retrying.shift() ?? this.freed.shift();
    if (early) return early;
    for (;;) {
      if (this.recovering.length === 0 && this.leftToRead) this.readLeftPage();
      const held = this.recovering.shift() ?? this.waiting.shift();
      if (!held) return this.takeDeferred();
      const sourceId = jobTarget(held.job);
      if ((this.runningBySource.get(sourceId) ?? 0) < this.perSourceConcurrency) return held;
      let line = this.deferred.get(sourceId);
      if (!line) {
        line = new HeldQueue();
        this.deferred.set(sourceId, line);
      }
      line.push(held);
      this.deferredCount++;
    }
  }

  /** The first deferred job of the source deferred first (a slot nothing else waits for). */
  private takeDeferred(): Held | undefined {
    for (const [sourceId, line] of this.deferred) {
      const first = line.shift();
      if (line.length === 0) this.deferred.delete(sourceId);
      if (!first) continue;
      this.deferredCount--;
      return first;
    }
    return undefined;
  }

  /** A run of `sourceId` ended: once the source is under its share, its first deferred job goes first. */
  private endedOne(sourceId: string): void {
    const left = (this.runningBySource.get(sourceId) ?? 1) - 1;
    if (left > 0) this.runningBySource.set(sourceId, left);
    else this.runningBySource.delete(sourceId);
    if (left >= this.perSourceConcurrency) return;
    const line = this.deferred.get(sourceId);
    const first = line?.shift();
    if (!first) return;
    this.deferredCount--;
    if (line?.length === 0) this.deferred.delete(sourceId);
    this.freed.push(first);
  }

  private succeeded(seq: number): void {
    // Only the job that ran alone after the pause tells that the data dir takes writes again: jobs
    // that started before it may have written before the failure.
    if (this.probing && seq === this.probe) {
      this.probing = false;
      this.probe = undefined;
      this.nextRetryDelayMs = this.retryDelayMs;
      this.options.log.info("source runs resumed: the data dir takes writes again");
    }
    this.finished(seq);
  }

  private failed(held: Held, error: unknown): void {
    if (error instanceof RunBusyError && !this.stopped) {
      this.holdUntil(held, error.retryAtMs);
      return;
    }
    if (!isDataDirFailure(error) || this.stopped) {
      this.options.log.error("a queued source run failed; it runs again at the next start", {
        target_id: jobTarget(held.job),
        error: String(error),
      });
      if (!isDataDirFailure(error)) this.countFailure(held, error);
      return;
    }
    // In job order, so the oldest is the one that tries again first.
    this.retrying.push(held);
    this.retrying.sort((a, b) => a.seq - b.seq);
    if (this.pauseTimer) return;
    const delayMs = this.nextRetryDelayMs;
    this.nextRetryDelayMs = Math.min(this.maxRetryDelayMs, delayMs * 2);
    this.options.log.warn("source runs paused: the data dir cannot take writes; one tries again after the pause", {
      pause_ms: delayMs,
      error: String(error),
    });
    this.probing = true;
    this.pauseTimer = setTimeout(() => {
      this.pauseTimer = undefined;
      this.pump();
    }, delayMs);
  }

  /**
   * Holds a job whose run another runner may still be doing (a process that died, restarted sooner
   * than the run's lease) until the lease ends, then runs it before the line (design 3.7).
   */
  private holdUntil(held: Held, retryAtMs: number): void {
    const delayMs = Math.max(0, retryAtMs - Date.now());
    this.options.log.debug("a queued run is held until its earlier runner's lease ends", {
      target_id: jobTarget(held.job),
      delay_ms: delayMs,
    });
    const timer = setTimeout(() => {
      this.held.delete(held.seq);
      this.freed.push(held);
      this.pump();
    }, delayMs);
    this.held.set(held.seq, timer);
  }

  /** Writes that a job left by a previous process starts, before it runs (a crash must not lose the count). */
  private countStart(held: Held): void {
    held.startCounted = true;
    try {
      this.statements.countStart.run(held.seq);
    } catch (error) {
      // The data dir refuses writes: the run will fail for it too, and is tried again.
      this.options.log.warn("a queued run's attempt could not be counted", { seq: held.seq, error: String(error) });
    }
  }

  /** Counts a failure on Sluice's side in the job's row (a left job's start was counted already). */
  private countFailure(held: Held, error: unknown): void {
    if (!this.db.open) return;
    try {
      this.statements.countFailure.run(held.left ? 0 : 1, String(error).slice(0, 1000), held.seq);
    } catch (failure) {
      this.options.log.warn("a queued run's failure could not be counted", { seq: held.seq, error: String(failure) });
    }
  }

  /** Moves a job that used up its attempts out of the queue, into `run_jobs_set_aside`. */
  private setAside(row: LeftRow): void {
    let target: string | undefined;
    try {
      target = jobTarget(JSON.parse(row.job) as RunJob);
    } catch {
      // A malformed row is set aside all the same.
    }
    try {
      this.db.transaction(() => {
        this.statements.setAside.run(Date.now(), row.seq);
        this.statements.remove.run(row.seq);
      })();
      this.options.log.error(
        `a queued run failed or ended its process ${row.attempts} times; it is set aside and will not run again`,
        { target_id: target, attempts: row.attempts, last_error: row.last_error, table: "run_jobs_set_aside" },
      );
    } catch (error) {
      this.options.log.error("a queued run that used up its attempts could not be set aside; it is skipped", {
        target_id: target,
        error: String(error),
      });
    }
  }

  private readLeftPage(): void {
    let rows: LeftRow[];
    try {
      rows = this.statements.leftPage.all(this.recoveredTo, this.leftUpTo, this.recoveryPageSize);
    } catch (error) {
      this.options.log.error("source runs left by a previous process could not be read", { error: String(error) });
      this.leftToRead = false;
      return;
    }
    if (rows.length < this.recoveryPageSize) this.leftToRead = false;
    for (const row of rows) {
      this.recoveredTo = row.seq;
      if (row.attempts >= MAX_QUEUED_RUN_ATTEMPTS) {
        this.setAside(row);
        continue;
      }
      const held = this.heldOf(row);
      if (!held) continue;
      held.left = true;
      this.recovering.push(held);
    }
  }

  /** A row read back as a held job; a malformed one is dropped (logged, its row deleted). */
  private heldOf(row: { seq: number; job: string }): Held | undefined {
    try {
      return { seq: row.seq, job: JSON.parse(row.job) as RunJob };
    } catch {
      this.options.log.error("a malformed queued source run was dropped", { seq: row.seq });
      this.finished(row.seq);
      return undefined;
    }
  }

  private finished(seq: number): void {
    if (this.stopped) {
      if (!this.db.open) return;
      this.deleteAlone([seq]);
      return;
    }
    this.pendingDeletes.push(seq);
    this.scheduleFlush(false);
  }
}
