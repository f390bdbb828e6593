import { describe, expect, it } from "vitest";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqlitePausedRuns } from "#adapters/local/sqlite-paused-runs";
import type { PausedRun } from "#core/ports/paused-runs";
import { pausedRunStoreContract } from "./paused-run-store.contract.ts";

describe("SqlitePausedRuns", () => {
  pausedRunStoreContract(async () => new SqlitePausedRuns(openSqlite(":memory:")));

  const AT = 1_790_000_000_000;
  const pause = (id: string, dueMs: number): PausedRun => ({
    id,
    tokenHash: "ab".repeat(32),
    workflowId: "p_a",
    deploymentId: "d_1",
    originRunId: id,
    trigger: { type: "timer", id: "ti_1" },
    kind: "delay",
    stepId: "c_wait",
    stepNamespace: "wait",
    createdAt: AT,
    dueMs,
    runs: 1,
    state: { event: null, steps: {} },
  });

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
