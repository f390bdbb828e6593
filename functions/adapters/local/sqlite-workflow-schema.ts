/**
 * Tables of `SqliteWorkflowStore` and `SqliteWorkflowRunStore`, appended to `MIGRATIONS` in
 * sqlite-database.ts (append only, like every migration there: released text never changes).
 *
 * - `workflows`: the record as JSON, with the columns its lists and its external id guard need.
 * - `workflow_endpoints`: one row per HTTP trigger; its key is the primary key, so two workflows
 *   cannot share one. `workflow_timers`: the timer triggers of active workflows only.
 * - `step_states`: each step's `$.service.db`, versioned.
 * - `workflow_runs`: one row per run; `attempts` and `status` are the columns `beginRun` and
 *   `finishRun` condition on, `started_at` the one the retention sweep reads.
 *   `workflow_run_counts` keeps each workflow's number of runs through triggers, so a list's
 *   `total_count` is one row read however many runs a busy workflow has, and no way of removing
 *   runs (a deletion, the sweep) can make it drift.
 */
export const WORKFLOW_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    external_id TEXT,
    record TEXT NOT NULL
  );
  CREATE INDEX workflows_by_user ON workflows (user_id, id);
  CREATE INDEX workflows_by_workspace ON workflows (workspace_id, id);
  CREATE UNIQUE INDEX workflows_by_external_id ON workflows (workspace_id, external_id) WHERE external_id IS NOT NULL;
  CREATE TABLE workflow_endpoints (
    key TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    trigger_id TEXT NOT NULL
  );
  CREATE INDEX workflow_endpoints_by_workflow ON workflow_endpoints (workflow_id);
  CREATE TABLE workflow_timers (
    timer_id TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    spec TEXT NOT NULL
  );
  CREATE INDEX workflow_timers_by_workflow ON workflow_timers (workflow_id);
  CREATE TABLE step_states (
    workflow_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    db TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, step_id)
  );
  CREATE TABLE workflow_runs (
    workflow_id TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (workflow_id, id)
  );
  CREATE INDEX workflow_runs_by_start ON workflow_runs (started_at);
  CREATE TABLE workflow_run_counts (
    workflow_id TEXT PRIMARY KEY,
    runs INTEGER NOT NULL
  );
  CREATE TRIGGER workflow_runs_counted AFTER INSERT ON workflow_runs BEGIN
    INSERT INTO workflow_run_counts (workflow_id, runs) VALUES (NEW.workflow_id, 1)
      ON CONFLICT (workflow_id) DO UPDATE SET runs = runs + 1;
  END;
  CREATE TRIGGER workflow_runs_uncounted AFTER DELETE ON workflow_runs BEGIN
    UPDATE workflow_run_counts SET runs = runs - 1 WHERE workflow_id = OLD.workflow_id;
  END;
  `,
];
