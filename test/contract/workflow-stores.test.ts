import { afterAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbSourceStore } from "#adapters/aws/dynamodb-source-store";
import { DynamoDbWorkflowRunStore } from "#adapters/aws/dynamodb-workflow-run-store";
import { DynamoDbWorkflowStore } from "#adapters/aws/dynamodb-workflow-store";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteWorkflowRunStore } from "#adapters/local/sqlite-workflow-run-store";
import { SqliteWorkflowStore } from "#adapters/local/sqlite-workflow-store";
import type { SourceRecord } from "#core/component-model";
import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { workflowRunStoreContract } from "./workflow-run-store.contract.ts";
import { workflowStoreContract } from "./workflow-store.contract.ts";

/** Every begin as a queued job's (`rerunnable`), as the run queue's runs are begun. */
class QueuedRunStore extends SqliteWorkflowRunStore {
  override beginRun(run: WorkflowRun, nowMs: number) {
    return super.beginRun(run, nowMs, { rerunnable: true });
  }
}

describe("SQLite adapters", () => {
  workflowStoreContract(async () => new SqliteWorkflowStore(openSqlite(":memory:")));
  /** The run store contract on `Store`, with small chunks so that deletions and the sweep cross chunk boundaries. */
  const runStoreContract = (Store: typeof SqliteWorkflowRunStore) =>
    workflowRunStoreContract(
      async (retention) =>
        new Store(openSqlite(":memory:"), {
          retention: { maxAgeMs: retention?.maxAgeMs ?? 0, keepPerChannel: 0 },
          chunkRows: 3,
        }),
      { sweep: (store, nowMs) => (store as SqliteWorkflowRunStore).trimExpired(nowMs) },
    );
  runStoreContract(SqliteWorkflowRunStore);
  describe("runs begun as queued jobs (their record waits in memory for their finish)", () => {
    runStoreContract(QueuedRunStore);
  });

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

describe("DynamoDB adapters (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  // The document client the AWS composition builds, so the contract covers its marshalling too.
  const documents = documentClient(client);
  let tables = 0;

  /** A fresh table per test, so each starts empty as the contract requires. */
  const freshTable = () => createResourcesTable(endpoint, `workflows-${process.pid}-${++tables}`);

  afterAll(() => client.destroy());

  workflowStoreContract(async () => new DynamoDbWorkflowStore(documents, await freshTable()));
  // Reads skip runs past their `expiresAt` (TTL deletes them days later): the sweep moves the
  // clock reads compare with, which is all that retention is on DynamoDB.
  const clocks = new WeakMap<object, { now: number }>();
  workflowRunStoreContract(
    async (retention) => {
      const clock = { now: Date.now() };
      const store = new DynamoDbWorkflowRunStore(documents, await freshTable(), {
        retention: { maxAgeMs: retention?.maxAgeMs ?? 0, keepPerChannel: 0 },
        clock: { nowMs: () => clock.now },
      });
      clocks.set(store, clock);
      return store;
    },
    {
      sweep: async (store, nowMs) => {
        clocks.get(store)!.now = nowMs;
      },
    },
  );

  it("keeps workflow timers and source timers apart in the shared TIMERS partition", async () => {
    const table = await freshTable();
    const sources = new DynamoDbSourceStore(documents, table);
    const workflows = new DynamoDbWorkflowStore(documents, table);
    const source: SourceRecord = {
      id: "dc_ticker",
      userId: "u_ada",
      workspaceId: "o_ada",
      componentId: "sc_ticker",
      name: "Ticker",
      nameSlug: "ticker",
      configuredProps: {},
      active: true,
      timer: { intervalSeconds: 60 },
      createdAt: 1,
      updatedAt: 1,
    };
    const timer = {
      type: "timer" as const,
      id: "ti_daily",
      spec: { cron: "0 9 * * *", timezone: "UTC" },
      scheduleChangedAt: 1,
      createdAt: 1,
      updatedAt: 1,
    };
    const workflow: WorkflowRecord = {
      id: "p_daily",
      userId: "u_ada",
      workspaceId: "o_ada",
      projectId: "proj_ada",
      name: "Daily",
      active: true,
      deploymentId: "d_daily",
      steps: [],
      triggers: [timer],
      createdAt: 1,
      updatedAt: 1,
    };
    await sources.createSource(source);
    await workflows.createWorkflow(workflow);
    expect((await sources.listActiveTimerSources()).map((s) => s.id)).toStrictEqual(["dc_ticker"]);
    expect(await workflows.listActiveTimerTriggers()).toStrictEqual([
      { workflowId: "p_daily", timerId: "ti_daily", spec: timer.spec },
    ]);
    // Each store's lists hold only its own copies, though both live in the user's partition.
    expect((await sources.listSourcesOfUser("u_ada", { limit: 10 })).totalCount).toBe(1);
    expect((await workflows.listWorkflowsOfUser("u_ada", { limit: 10 })).items).toStrictEqual([workflow]);
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
