import type { Page, PageQuery } from "#core/pagination";
import { DEFAULT_EVENT_RETENTION, type EventRetention } from "#core/ports/event-store";
import type { BeginRunOptions, BeginRunResult, WorkflowRunStore } from "#core/ports/workflow-run-store";
import type { WorkflowRun } from "#core/workflow-model";
import { nextTurn, TurnBudget } from "./event-loop.ts";
import type { SqliteDatabase } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";

interface RunRow {
  record: string;
}

/** The error of a run the server stopped during, which no queued job will run again. */
export const SERVER_STOPPED_ERROR = "ServerStoppedError";

const toRun = (row: RunRow): WorkflowRun => JSON.parse(row.record) as WorkflowRun;

const unwrittenKey = (workflowId: string, id: string) => `${workflowId}\n${id}`;

/** A write waiting for the turn's transaction, and who waits for its outcome. */
interface PendingWrite {
  apply(): unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** A run begun and not yet written to the file (see {@link SqliteWorkflowRunStore}). */
interface UnwrittenBegin {
  run: WorkflowRun;
  /** The write-behind tick it was begun in: it is written at the tick after the next. */
  tick: number;
}

/** How long a begun run's record may wait in memory for its finish, at most twice this. */
export const BEGIN_WRITE_DELAY_MS = 200;

export interface SqliteWorkflowRunStoreOptions {
  /** How long runs are kept: as events (`maxAgeMs` by start, `keepPerChannel` newest runs per workflow). */
  retention?: EventRetention;
  /** Runs removed per transaction by deletions and the sweep, with a turn of the event loop between two. @default 500 */
  chunkRows?: number;
  /** How long the record of a run begun with `rerunnable` may wait for its finish (written within twice this). @default BEGIN_WRITE_DELAY_MS */
  beginWriteDelayMs?: number;
}

/**
 * `WorkflowRunStore` on the local SQLite file.
 *
 * Writes are grouped (decision 69): the `beginRun`s and `finishRun`s of one turn of the event loop
 * are applied in call order in ONE transaction (`setImmediate`), and each resolves after its
 * commit with what it found, so a busy workflow pays one commit per turn for its run records
 * rather than two per run. A failed group is tried again write by write, so one bad write fails
 * only itself. Reads and deletions first write what is pending.
 *
 * A run begun with `rerunnable` (a queued job, which runs again at the next start if this process
 * dies) is not written at its begin: its record waits in memory, where the claims of later begins
 * see it, and is written once, ended, by its finish (one insert, not an insert then an update).
 * One that has not ended within `beginWriteDelayMs` to twice that is written as `running`, and
 * every read, deletion, sweep and {@link flush} writes those waiting first, so what the store
 * answers is exactly what it answered when each begin was written at once. Only a crash can tell
 * the difference: a run begun in the last moments before it is not on file, so its job, run again,
 * begins it with `attempts` 1 rather than 2 (decision 462).
 *
 * Retention runs in the background: {@link trimExpired}, called from a timer by the local
 * composition, removes runs as events are removed, in chunks with a turn between two.
 */
export class SqliteWorkflowRunStore implements WorkflowRunStore {
  private readonly statements;
  private readonly retention: EventRetention;
  private readonly chunkRows: number;
  private pending: PendingWrite[] = [];
  private readonly applyAll;
  private readonly writeBegins: (runs: WorkflowRun[]) => void;
  /** Runs begun and not yet written, by `workflowId\nid`: claims read them before the file. */
  private readonly unwritten = new Map<string, UnwrittenBegin>();
  private readonly beginWriteDelayMs: number;
  private tick = 0;
  private tickTimer: NodeJS.Timeout | undefined;
  /** While a group applies: what it changed in {@link unwritten}, to take back if it fails. */
  private undo: [string, UnwrittenBegin | undefined][] | undefined;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteWorkflowRunStoreOptions = {},
  ) {
    this.retention = { ...(options.retention ?? DEFAULT_EVENT_RETENTION) };
    this.chunkRows = Math.max(1, Math.floor(options.chunkRows ?? 500));
    this.beginWriteDelayMs = Math.max(1, options.beginWriteDelayMs ?? BEGIN_WRITE_DELAY_MS);
    this.statements = {
      claim: db.prepare<[string, string], { status: string; lease_until: number; attempts: number }>(
        "SELECT status, lease_until, attempts FROM workflow_runs WHERE workflow_id = ? AND id = ?",
      ),
      put: db.prepare<[string, string, string, number, number, number, string]>(
        `INSERT INTO workflow_runs (workflow_id, id, status, lease_until, attempts, started_at, record)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (workflow_id, id) DO UPDATE SET status = excluded.status, lease_until = excluded.lease_until,
           attempts = excluded.attempts, started_at = excluded.started_at, record = excluded.record`,
      ),
      finish: db.prepare<[string, number, string, string, string, number]>(
        `UPDATE workflow_runs SET status = ?, lease_until = ?, record = ?
         WHERE workflow_id = ? AND id = ? AND status = 'running' AND attempts = ?`,
      ),
      get: db.prepare<[string, string], RunRow>("SELECT record FROM workflow_runs WHERE workflow_id = ? AND id = ?"),
      count: db.prepare<[string], { runs: number }>("SELECT runs FROM workflow_run_counts WHERE workflow_id = ?"),
      deleteChunk: db.prepare<[string, number]>(
        "DELETE FROM workflow_runs WHERE rowid IN (SELECT rowid FROM workflow_runs WHERE workflow_id = ? LIMIT ?)",
      ),
      forgetCount: db.prepare<[string]>("DELETE FROM workflow_run_counts WHERE workflow_id = ?"),
      expiredChunk: db.prepare<[number, number]>(
        "DELETE FROM workflow_runs WHERE rowid IN (SELECT rowid FROM workflow_runs WHERE started_at < ? LIMIT ?)",
      ),
      overfull: db.prepare<[number], { workflow_id: string; runs: number }>(
        "SELECT workflow_id, runs FROM workflow_run_counts WHERE runs > ?",
      ),
      oldestChunk: db.prepare<[string, number]>(
        "DELETE FROM workflow_runs WHERE rowid IN (SELECT rowid FROM workflow_runs WHERE workflow_id = ? ORDER BY id LIMIT ?)",
      ),
      ofWorkflow: pageStatements<RunRow>(db, "workflow_runs", "workflow_id"),
      // The run queue's `run_jobs` rows (sqlite-run-queue.ts) hold each queued workflow job's `runId`;
      // a row that is not JSON (the queue drops it when it reads it) must not fail the start.
      endUnqueued: db.prepare<[{ now: number; error: string }]>(
        `UPDATE workflow_runs SET status = 'error', lease_until = 0,
           record = json_set(record, '$.status', 'error', '$.leaseUntilMs', 0, '$.endedAt', @now,
             '$.durationMs', max(0, @now - started_at), '$.error', json(@error))
         WHERE status = 'running' AND id NOT IN (
           SELECT run_id FROM (SELECT CASE WHEN json_valid(job) THEN json_extract(job, '$.runId') END AS run_id
             FROM run_jobs) WHERE run_id IS NOT NULL)`,
      ),
      releaseLeases: db.prepare("UPDATE workflow_runs SET lease_until = 0 WHERE status = 'running'"),
    };
    this.applyAll = db.transaction((writes: PendingWrite[]) => writes.map((write) => write.apply()));
    this.writeBegins = db.transaction((runs: WorkflowRun[]) => {
      for (const run of runs) this.put(run);
    }).immediate;
  }

  beginRun(run: WorkflowRun, nowMs: number, options: BeginRunOptions = {}): Promise<BeginRunResult> {
    const key = unwrittenKey(run.workflowId, run.id);
    return this.enqueue((): BeginRunResult => {
      const stored = this.claimed(key, run.workflowId, run.id);
      if (stored && stored.status !== "running") return { outcome: "done" };
      if (stored && stored.leaseUntilMs >= nowMs) return { outcome: "busy", leaseUntilMs: stored.leaseUntilMs };
      const begun: WorkflowRun = { ...run, status: "running", attempts: (stored?.attempts ?? 0) + 1 };
      if (options.rerunnable) {
        this.setUnwritten(key, { run: begun, tick: this.tick });
        this.startTicks();
      } else {
        this.setUnwritten(key, undefined);
        this.put(begun);
      }
      return { outcome: "started", run: begun };
    });
  }

  async finishRun(run: WorkflowRun): Promise<void> {
    const s = this.statements;
    const key = unwrittenKey(run.workflowId, run.id);
    await this.enqueue(() => {
      const waiting = this.unwritten.get(key);
      // Written only over the same attempt still running (decision 159), on file or waiting here.
      if (!waiting) {
        return s.finish.run(run.status, run.leaseUntilMs, JSON.stringify(run), run.workflowId, run.id, run.attempts);
      }
      if (waiting.run.attempts !== run.attempts) return undefined;
      this.setUnwritten(key, undefined);
      return this.put(run);
    });
  }

  /**
   * Changes a waiting begin within a group's transaction, so that a group rolled back also
   * takes back what it changed here (its writes are then applied again one by one).
   */
  private setUnwritten(key: string, waiting: UnwrittenBegin | undefined): void {
    this.undo?.push([key, this.unwritten.get(key)]);
    if (waiting) this.unwritten.set(key, waiting);
    else this.unwritten.delete(key);
  }

  /** One or more grouped writes in one transaction; on failure what they changed in memory is taken back. */
  private applyGroup(batch: PendingWrite[]): unknown[] {
    const undo: [string, UnwrittenBegin | undefined][] = [];
    this.undo = undo;
    try {
      return this.applyAll.immediate(batch);
    } catch (error) {
      for (const [key, before] of undo.reverse()) {
        if (before) this.unwritten.set(key, before);
        else this.unwritten.delete(key);
      }
      throw error;
    } finally {
      this.undo = undefined;
    }
  }

  /** A run's claim as it stands: a begin not yet written is newer than the file's row (a take-over's row still says the old attempt). */
  private claimed(key: string, workflowId: string, id: string) {
    const waiting = this.unwritten.get(key)?.run;
    if (waiting) return waiting;
    const row = this.statements.claim.get(workflowId, id);
    return row && { status: row.status, leaseUntilMs: row.lease_until, attempts: row.attempts };
  }

  private put(run: WorkflowRun): unknown {
    return this.statements.put.run(
      run.workflowId,
      run.id,
      run.status,
      run.leaseUntilMs,
      run.attempts,
      run.startedAt,
      JSON.stringify(run),
    );
  }

  async getRun(workflowId: string, runId: string): Promise<WorkflowRun | undefined> {
    this.flush();
    const row = this.statements.get.get(workflowId, runId);
    return row && toRun(row);
  }

  async listRuns(workflowId: string, page: PageQuery): Promise<Page<WorkflowRun>> {
    this.flush();
    const s = this.statements;
    return readPage(s.ofWorkflow, workflowId, page, toRun, (id) => s.count.get(id)?.runs ?? 0);
  }

  async deleteRuns(workflowId: string): Promise<void> {
    this.flushPending();
    // Not written first: a finish that comes after the deletion then finds no run, as on file (decision 159).
    for (const [key, { run }] of this.unwritten) if (run.workflowId === workflowId) this.unwritten.delete(key);
    const s = this.statements;
    // In chunks: a busy workflow may have kept millions of runs, and the event loop is shared.
    while (s.deleteChunk.run(workflowId, this.chunkRows).changes >= this.chunkRows) await nextTurn();
    s.forgetCount.run(workflowId);
  }

  /**
   * Removes runs that started longer than `maxAgeMs` before `nowMs`, then each workflow's oldest
   * beyond its newest `keepPerChannel` (as events are trimmed); the count removed.
   */
  async trimExpired(nowMs: number): Promise<number> {
    this.flush();
    const s = this.statements;
    const budget = new TurnBudget();
    let removed = 0;
    const { maxAgeMs, keepPerChannel } = this.retention;
    if (maxAgeMs > 0) {
      for (;;) {
        if (!this.db.open) return removed;
        const { changes } = s.expiredChunk.run(nowMs - maxAgeMs, this.chunkRows);
        removed += changes;
        if (changes < this.chunkRows) break;
        await nextTurn();
      }
    }
    if (keepPerChannel > 0) {
      for (const { workflow_id: workflowId, runs } of s.overfull.all(keepPerChannel)) {
        let excess = runs - keepPerChannel;
        while (excess > 0 && this.db.open) {
          const { changes } = s.oldestChunk.run(workflowId, Math.min(excess, this.chunkRows));
          if (changes === 0) break;
          removed += changes;
          excess -= changes;
          await budget.spend();
        }
      }
    }
    return removed;
  }

  /**
   * What local mode does once at start, before its run queue starts, with the runs its previous
   * process left `running`. One server per data dir is enforced (decision 123), so each was begun by
   * a process that is gone. A run whose job is still queued gets its lease ended, so the job takes
   * it over at once rather than after the lease (time limit + 15 s). A run with no job (one that
   * answered its caller itself, `custom_response`, which is never queued) will not run again: it is
   * ended as an error, not left `running` for ever. Answers how many of each.
   */
  recoverAtStart(nowMs: number): { released: number; ended: number } {
    this.flush();
    const s = this.statements;
    const error = {
      code: SERVER_STOPPED_ERROR,
      cellId: "",
      message:
        "the server stopped during this run; a run that answers its caller is not queued, so it did not run again",
    };
    return this.db
      .transaction(() => {
        const ended = s.endUnqueued.run({ now: nowMs, error: JSON.stringify(error) }).changes;
        return { released: s.releaseLeases.run().changes, ended };
      })
      .immediate();
  }

  /**
   * Writes what is pending now, then the begun runs still waiting for their finish, as `running`
   * (reads call it, so they answer what the file would hold had every begin been written at once;
   * the composition calls it before closing the file).
   */
  readonly flush = (): void => {
    this.flushPending();
    this.writeUnwritten(Number.POSITIVE_INFINITY);
  };

  /** Writes, as `running`, the begun runs waiting since the write-behind tick `upToTick` or earlier. */
  private writeUnwritten(upToTick: number): void {
    if (this.unwritten.size === 0 || !this.db.open) return;
    const due = [...this.unwritten].filter(([, waiting]) => waiting.tick <= upToTick);
    if (due.length === 0) return;
    try {
      this.writeBegins(due.map(([, { run }]) => run));
      for (const [key] of due) this.unwritten.delete(key);
    } catch {
      // One by one, so one that cannot be written keeps no other waiting. One that fails stays for the
      // next tick, read or finish (a finish that fails fails its run, as it always did).
      for (const [key, { run }] of due) {
        try {
          this.writeBegins([run]);
          this.unwritten.delete(key);
        } catch {}
      }
    }
  }

  /** Keeps the write-behind ticks going while begun runs wait: each tick writes those begun before the previous one. */
  private startTicks(): void {
    if (this.tickTimer) return;
    this.tickTimer = setTimeout(() => {
      this.tickTimer = undefined;
      this.tick++;
      this.writeUnwritten(this.tick - 2);
      if (this.unwritten.size > 0) this.startTicks();
    }, this.beginWriteDelayMs);
    this.tickTimer.unref();
  }

  /** Writes the turn's grouped writes now. */
  private readonly flushPending = (): void => {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    let outcomes: unknown[];
    try {
      outcomes = this.applyGroup(batch);
    } catch {
      // One failed write must not fail the others: each is tried again in its own transaction.
      for (const write of batch) {
        try {
          write.resolve(this.applyGroup([write])[0]);
        } catch (error) {
          write.reject(error);
        }
      }
      return;
    }
    for (const [index, write] of batch.entries()) write.resolve(outcomes[index]);
  };

  private enqueue<T>(apply: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ apply, resolve: resolve as (value: unknown) => void, reject });
      if (this.pending.length === 1) setImmediate(this.flushPending);
    });
  }
}
