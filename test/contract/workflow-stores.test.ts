import { describe, expect, it } from "vitest";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteWorkflowRunStore } from "#adapters/local/sqlite-workflow-run-store";
import { SqliteWorkflowStore } from "#adapters/local/sqlite-workflow-store";
import { workflowRunStoreContract } from "./workflow-run-store.contract.ts";
import { workflowStoreContract } from "./workflow-store.contract.ts";

// The DynamoDB side joins with its adapters (docs/design/workflows.md, build step 2), and this file
// then moves to the `dynamodb` project of vitest.config.ts.
describe("SQLite adapters", () => {
  workflowStoreContract(async () => new SqliteWorkflowStore(openSqlite(":memory:")));
  workflowRunStoreContract(
    async (retention) =>
      new SqliteWorkflowRunStore(openSqlite(":memory:"), {
        retention: { maxAgeMs: retention?.maxAgeMs ?? 0, keepPerChannel: 0 },
        // Small chunks, so deletions and the sweep cross chunk boundaries in these tests.
        chunkRows: 3,
      }),
    { sweep: (store, nowMs) => (store as SqliteWorkflowRunStore).trimExpired(nowMs) },
  );

  it("finds workflows, timers and runs on indexes, never by scanning a table", () => {
    const db = openSqlite(":memory:");
    const workflows = new SqliteWorkflowStore(db);
    const runs = new SqliteWorkflowRunStore(db);
    const planOf = (store: object, name: string, ...params: unknown[]) => plan(db, statementsOf(store), name, params);
    expect(planOf(workflows, "byHttpKey", "k")).toMatch(/SEARCH e USING INDEX sqlite_autoindex_workflow_endpoints_1/);
    expect(planOf(workflows, "byHttpKey", "k")).toMatch(/SEARCH w USING INDEX sqlite_autoindex_workflows_1/);
    expect(planOf(workflows, "byExternalId", "o", "x")).toMatch(/USING INDEX workflows_by_external_id/);
    expect(planOf(workflows, "deleteEndpoints", "p")).toMatch(/USING (COVERING )?INDEX workflow_endpoints_by_workflow/);
    expect(planOf(workflows, "deleteTimers", "p")).toMatch(/USING (COVERING )?INDEX workflow_timers_by_workflow/);
    expect(planOf(runs, "claim", "p", "r")).toMatch(/USING INDEX sqlite_autoindex_workflow_runs_1/);
    expect(planOf(runs, "expiredChunk", 1, 1)).toMatch(/USING (COVERING )?INDEX workflow_runs_by_start/);
    for (const name of ["byHttpKey", "byExternalId", "deleteEndpoints", "deleteTimers"]) {
      expect(planOf(workflows, name, "a", "b")).not.toMatch(
        /SCAN (w|e|workflows|workflow_endpoints|workflow_timers)\b/,
      );
    }
    expect(planOf(runs, "deleteChunk", "p", 1)).not.toMatch(/SCAN workflow_runs\b/);
  });
});

/** The statements a store prepared, read back from better-sqlite3 (`source` is their SQL). */
const statementsOf = (store: object) => (store as { statements: Record<string, { source: string }> }).statements;

function plan(db: SqliteDatabase, statements: Record<string, { source: string }>, name: string, params: unknown[]) {
  const sql = statements[name]!.source;
  const count = (sql.match(/\?/g) ?? []).length;
  return db
    .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...params.slice(0, count))
    .map((row) => row.detail)
    .join("\n");
}
