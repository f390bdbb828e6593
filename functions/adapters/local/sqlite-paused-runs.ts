/**
 * `PausedRunStore` on local mode's SQLite file: one row per paused workflow run, its record as
 * JSON, indexed by when it comes due and by workflow (docs/workflows.md "Pausing a run"). Rows
 * survive a restart; the driver (`drivers/paused-run-driver.ts`) dispatches what comes due.
 */
import type { PauseDispatch, PausedRun, PolledPausedRunStore } from "#core/ports/paused-runs";
import type { SqliteDatabase } from "./sqlite-database.ts";

/**
 * The table, appended to `MIGRATIONS` in sqlite-database.ts (append only). `taken_at` is the
 * dispatch's time, NULL until one takes the pause.
 */
export const PAUSED_RUN_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE paused_runs (
    id TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    due_ms INTEGER NOT NULL,
    taken_at INTEGER,
    record TEXT NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX paused_runs_by_due ON paused_runs (due_ms) WHERE taken_at IS NULL;
  CREATE INDEX paused_runs_taken ON paused_runs (taken_at) WHERE taken_at IS NOT NULL;
  CREATE INDEX paused_runs_by_workflow ON paused_runs (workflow_id);
  `,
  // What each pause keeps, added up for a workflow's deletion (the workspace's stored bytes).
  `ALTER TABLE paused_runs ADD COLUMN state_bytes INTEGER NOT NULL DEFAULT 0;`,
];

const toPause = (row: { record: string }): PausedRun => JSON.parse(row.record) as PausedRun;

export class SqlitePausedRuns implements PolledPausedRunStore {
  private readonly insert;
  private readonly one;
  private readonly take;
  private readonly deleteOne;
  private readonly count;
  private readonly deleteWorkflow;
  private readonly dueRows;
  private readonly retouch;
  private readonly bytes;

  constructor(db: SqliteDatabase) {
    this.insert = db.prepare<[string, string, number, number, string]>(
      "INSERT OR REPLACE INTO paused_runs (id, workflow_id, due_ms, state_bytes, taken_at, record) VALUES (?, ?, ?, ?, NULL, ?)",
    );
    this.bytes = db.prepare<[string], { bytes: number | null }>(
      "SELECT SUM(state_bytes) AS bytes FROM paused_runs WHERE workflow_id = ?",
    );
    this.one = db.prepare<[string], { record: string }>("SELECT record FROM paused_runs WHERE id = ?");
    // One statement: two takers (a URL and the driver) cannot both win.
    this.take = db.prepare<[number, string, string]>(
      "UPDATE paused_runs SET taken_at = ?, record = ? WHERE id = ? AND taken_at IS NULL",
    );
    this.retouch = db.prepare<[number, string]>(
      "UPDATE paused_runs SET taken_at = ? WHERE id = ? AND taken_at IS NOT NULL",
    );
    this.deleteOne = db.prepare<[string]>("DELETE FROM paused_runs WHERE id = ?");
    this.count = db.prepare<[string], { pending: number }>(
      "SELECT COUNT(*) AS pending FROM paused_runs WHERE workflow_id = ?",
    );
    this.deleteWorkflow = db.prepare<[string], { id: string }>(
      "DELETE FROM paused_runs WHERE workflow_id = ? RETURNING id",
    );
    this.dueRows = db.prepare<[number, number, number], { record: string }>(
      `SELECT record FROM (
         SELECT record, due_ms AS at FROM paused_runs WHERE taken_at IS NULL AND due_ms <= ?
         UNION ALL
         SELECT record, taken_at AS at FROM paused_runs WHERE taken_at IS NOT NULL AND taken_at <= ?
       ) ORDER BY at LIMIT ?`,
    );
  }

  async add(pause: PausedRun): Promise<void> {
    const { dispatch: _ignored, ...waiting } = pause;
    this.insert.run(pause.id, pause.workflowId, pause.dueMs, pause.stateBytes, JSON.stringify(waiting));
  }

  async get(id: string): Promise<PausedRun | undefined> {
    const row = this.one.get(id);
    return row ? toPause(row) : undefined;
  }

  async dispatch(id: string, dispatch: PauseDispatch): Promise<{ pause: PausedRun; won: boolean } | undefined> {
    const row = this.one.get(id);
    if (!row) return undefined;
    const pause = toPause(row);
    if (pause.dispatch) return { pause, won: false };
    const taken: PausedRun = { ...pause, dispatch };
    if (this.take.run(dispatch.atMs, JSON.stringify(taken), id).changes === 1) return { pause: taken, won: true };
    // Taken or removed meanwhile (another connection): the stored one won.
    const stored = await this.get(id);
    return stored ? { pause: stored, won: false } : undefined;
  }

  async touch(id: string, atMs: number): Promise<void> {
    this.retouch.run(atMs, id);
  }

  async remove(id: string): Promise<boolean> {
    return this.deleteOne.run(id).changes === 1;
  }

  async countPending(workflowId: string): Promise<number> {
    return this.count.get(workflowId)?.pending ?? 0;
  }

  async removeWorkflow(workflowId: string): Promise<string[]> {
    return this.deleteWorkflow.all(workflowId).map((row) => row.id);
  }

  async stateBytesOf(workflowId: string): Promise<number> {
    return this.bytes.get(workflowId)?.bytes ?? 0;
  }

  async due(nowMs: number, takenBeforeMs: number, limit: number): Promise<PausedRun[]> {
    return this.dueRows.all(nowMs, takenBeforeMs, limit).map(toPause);
  }
}
