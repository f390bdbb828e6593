import { afterAll, describe, expect, inject, it } from "vitest";
import { documentClient } from "#adapters/aws/dynamodb-client";
import { DynamoDbPausedRuns } from "#adapters/aws/dynamodb-paused-runs";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqlitePausedRuns } from "#adapters/local/sqlite-paused-runs";
import type { PausedRun } from "#core/ports/paused-runs";
import { createResourcesTable, localDynamoDbClient } from "../support/dynamodb-local.ts";
import { pausedRunFixture, pausedRunStoreContract } from "./paused-run-store.contract.ts";

describe("SqlitePausedRuns", () => {
  pausedRunStoreContract(async () => new SqlitePausedRuns(openSqlite(":memory:")));

  const AT = 1_790_000_000_000;
  const AT_DUE = {
    trigger: { type: "timer", id: "ti_1" },
    kind: "delay",
    stepId: "c_wait",
    stepNamespace: "wait",
  } as const;
  const pause = (id: string, dueMs: number): PausedRun =>
    pausedRunFixture(id, { ...AT_DUE, createdAt: AT, dueMs, state: { event: null, steps: {} } });

  it("finds what is due earliest first, and a taken pause again only once it was taken long ago", async () => {
    const store = new SqlitePausedRuns(openSqlite(":memory:"));
    await store.add(pause("run_late", AT + 50));
    await store.add(pause("run_early", AT + 10));
    await store.add(pause("run_future", AT + 10_000));
    await store.add(pause("run_taken", AT + 5));
    await store.dispatch("run_taken", { how: "resume", atMs: AT + 1 });
    const ids = async (now: number, takenBefore: number, limit = 10) =>
      (await store.due(now, takenBefore, limit)).map((found) => found.id);
    expect(await ids(AT + 100, AT)).toEqual(["run_early", "run_late"]);
    expect(await ids(AT + 100, AT + 1)).toEqual(["run_taken", "run_early", "run_late"]);
    expect(await ids(AT + 100, AT + 1, 1)).toEqual(["run_taken"]);
    // Queued again: not found again until it is as old once more.
    await store.touch("run_taken", AT + 200);
    expect(await ids(AT + 100, AT + 1)).toEqual(["run_early", "run_late"]);
    expect(await ids(AT + 300, AT + 200)).toEqual(["run_early", "run_late", "run_taken"]);
    // A pause not taken is not touched.
    await store.touch("run_early", AT + 1);
    expect((await store.get("run_early"))?.dispatch).toBeUndefined();
    expect(await ids(AT + 20, AT)).toEqual(["run_early"]);
  });

  it("keeps pauses in the data file across a reopen", async () => {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "paused-runs-"));
    try {
      const first = openSqlite(join(dir, "sluice.db"));
      await new SqlitePausedRuns(first).add(pause("run_a", AT));
      first.close();
      const again = openSqlite(join(dir, "sluice.db"));
      expect(await new SqlitePausedRuns(again).get("run_a")).toEqual(pause("run_a", AT));
      again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("DynamoDbPausedRuns (DynamoDB Local)", () => {
  const endpoint = inject("dynamodbEndpoint");
  const client = localDynamoDbClient(endpoint);
  const documents = documentClient(client);
  let tables = 0;
  const freshTable = () => createResourcesTable(endpoint, `paused-runs-${process.pid}-${++tables}`);
  afterAll(() => client.destroy());

  pausedRunStoreContract(async () => new DynamoDbPausedRuns(documents, await freshTable()));

  it("counts and forgets many pauses of a workflow, and keeps a record at its size bound with a dispatch", async () => {
    const store = new DynamoDbPausedRuns(documents, await freshTable());
    // 256 KiB of state: the most a pause keeps (`PAUSE_STATE_MAX_BYTES`), with a 32 KiB request on top.
    const big = "x".repeat(256 * 1024 - 64);
    const first = pausedRunFixture("run_big", {
      workflowId: "p_many",
      createdAt: 1,
      dueMs: 2,
      state: { event: big, steps: {} },
    });
    await store.add(first);
    const request = { method: "POST", bodyRaw: "y".repeat(32 * 1024) };
    expect((await store.dispatch("run_big", { how: "resume", atMs: 3, request }))?.won).toBe(true);
    expect((await store.get("run_big"))?.dispatch?.request).toEqual(request);
    // More pauses than one BatchWriteItem deletes (25 requests, two per pause).
    const ids = Array.from({ length: 300 }, (_, index) => `run_${String(index).padStart(4, "0")}`);
    for (let start = 0; start < ids.length; start += 50) {
      await Promise.all(
        ids.slice(start, start + 50).map((id) => store.add({ ...first, id, state: { event: null, steps: {} } })),
      );
    }
    expect(await store.countPending("p_many")).toBe(301);
    expect((await store.removeWorkflow("p_many")).length).toBe(301);
    expect(await store.countPending("p_many")).toBe(0);
    expect(await store.get("run_big")).toBeUndefined();
  });
});
