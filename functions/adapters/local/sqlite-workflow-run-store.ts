import type { Page, PageQuery } from "#core/pagination";
import { DEFAULT_EVENT_RETENTION, type EventRetention } from "#core/ports/event-store";
import type { BeginRunResult, WorkflowRunStore } from "#core/ports/workflow-run-store";
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

/** A write waiting for the turn's transaction, and who waits for its outcome. */
interface PendingWrite {
  apply(): unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export interface SqliteWorkflowRunStoreOptions {
  /** How long runs are kept: as events (`maxAgeMs` by start, `keepPerChannel` newest runs per workflow). */
  retention?: EventRetention;
  /** Runs removed per transaction by deletions and the sweep, with a turn of the event loop between two. @default 500 */
  chunkRows?: number;
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
 * Retention runs in the background: {@link trimExpired}, called from a timer by the local
 * composition, removes runs as events are removed, in chunks with a turn between two.
 */
export class SqliteWorkflowRunStore implements WorkflowRunStore {
  private readonly statements;
  private readonly retention: EventRetention;
  private readonly chunkRows: number;
  private pending: PendingWrite[] = [];
  private readonly applyAll;

  constructor(
    private readonly db: SqliteDatabase,
    options: SqliteWorkflowRunStoreOptions = {},
  ) {
    this.retention = { ...(options.retention ?? DEFAULT_EVENT_RETENTION) };
    this.chunkRows = Math.max(1, Math.floor(options.chunkRows ?? 500));
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
  }

  beginRun(run: WorkflowRun, nowMs: number): Promise<BeginRunResult> {
    const s = this.statements;
    return this.enqueue((): BeginRunResult => {
      const stored = s.claim.get(run.workflowId, run.id);
      if (stored && stored.status !== "running") return { outcome: "done" };
      if (stored && stored.lease_until >= nowMs) return { outcome: "busy", leaseUntilMs: stored.lease_until };
      const begun: WorkflowRun = { ...run, status: "running", attempts: (stored?.attempts ?? 0) + 1 };
      s.put.run(
        begun.workflowId,
        begun.id,
        begun.status,
        begun.leaseUntilMs,
        begun.attempts,
        begun.startedAt,
        JSON.stringify(begun),
      );
      return { outcome: "started", run: begun };
    });
  }

  async finishRun(run: WorkflowRun): Promise<void> {
    const s = this.statements;
    await this.enqueue(() =>
      s.finish.run(run.status, run.leaseUntilMs, JSON.stringify(run), run.workflowId, run.id, run.attempts),
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
    this.flush();
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

  /** Writes the pending writes now (reads call it; the composition calls it before closing the file). */
  readonly flush = (): void => {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    let outcomes: unknown[];
    try {
      outcomes = this.applyAll.immediate(batch);
    } catch {
      // One failed write must not fail the others: each is tried again in its own transaction.
      for (const write of batch) {
        try {
          write.resolve(this.applyAll.immediate([write])[0]);
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
      if (this.pending.length === 1) setImmediate(this.flush);
    });
  }
}
