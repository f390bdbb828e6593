import { describe } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
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
});
