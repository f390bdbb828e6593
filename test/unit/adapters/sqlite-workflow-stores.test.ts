import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { nextTurn } from "#adapters/local/event-loop";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SERVER_STOPPED_ERROR, SqliteWorkflowRunStore } from "#adapters/local/sqlite-workflow-run-store";
import { SqliteWorkflowStore } from "#adapters/local/sqlite-workflow-store";
import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";
import { eventually, when } from "../../support/eventually.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A data file with two connections to it, as local mode and the CLI have. */
function sharedFile() {
  const dir = mkdtempSync(join(tmpdir(), "sluice-workflows-"));
  dirs.push(dir);
  const file = join(dir, "sluice.db");
  return { mine: openSqlite(file), other: openSqlite(file) };
}

const run = (id: string, overrides: Partial<WorkflowRun> = {}): WorkflowRun => ({
  id,
  workflowId: "p_a",
  deploymentId: "d_a",
  trigger: { type: "http", id: "hi_a" },
  status: "running",
  leaseUntilMs: 2_000,
  attempts: 0,
  startedAt: 1_000,
  eventPreview: {},
  steps: [],
  logs: [],
  ...overrides,
});

const workflow = (name: string): WorkflowRecord => ({
  id: "p_a",
  userId: "u_a",
  workspaceId: "o_a",
  projectId: "proj_a",
  name,
  active: true,
  deploymentId: "d_a",
  steps: [],
  triggers: [{ type: "http", id: "hi_a", key: "key-a", customResponse: false, createdAt: 0, updatedAt: 0 }],
  createdAt: 0,
  updatedAt: 0,
});

describe("SqliteWorkflowRunStore grouped writes", () => {
  it("writes one turn's begins and finishes in call order, each resolving once committed", async () => {
    const { mine, other } = sharedFile();
    const writer = new SqliteWorkflowRunStore(mine);
    const reader = new SqliteWorkflowRunStore(other);
    const begun = Promise.all([writer.beginRun(run("run_1"), 1_000), writer.beginRun(run("run_2"), 1_000)]);
    // A finish called in the same turn, after its begin, applies to what that begin wrote.
    const finished = writer.finishRun({ ...run("run_1"), attempts: 1, status: "success", endedAt: 1_005 });
    expect(await reader.listRuns("p_a", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
    await Promise.all([begun, finished]);
    const page = await reader.listRuns("p_a", { limit: 10 });
    expect(page.items.map((r) => [r.id, r.status])).toEqual([
      ["run_2", "running"],
      ["run_1", "success"],
    ]);
  });

  it("fails only the write that failed, and writes the rest of its turn", async () => {
    const store = new SqliteWorkflowRunStore(openSqlite(":memory:"));
    const results = await Promise.allSettled([
      store.beginRun(run("run_ok"), 1_000),
      // JSON cannot hold a bigint: this write throws inside the turn's transaction.
      store.beginRun(run("run_bad", { eventPreview: { n: 1n } as never }), 1_000),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
    expect((await store.listRuns("p_a", { limit: 10 })).items.map((r) => r.id)).toEqual(["run_ok"]);
  });

  it("writes what is pending on flush, before the file is closed", async () => {
    const { mine, other } = sharedFile();
    const writer = new SqliteWorkflowRunStore(mine);
    const begun = writer.beginRun(run("run_1"), 1_000);
    writer.flush();
    mine.close();
    expect(await begun).toMatchObject({ outcome: "started" });
    expect(await new SqliteWorkflowRunStore(other).getRun("p_a", "run_1")).toMatchObject({ attempts: 1 });
  });
});

describe("SqliteWorkflowRunStore runs begun rerunnable (a queued job's)", () => {
  const rerunnable = { rerunnable: true };
  /** What the file holds, read by another connection: status and attempts by run id. */
  const onFile = (other: ReturnType<typeof sharedFile>["other"]) =>
    Object.fromEntries(
      other
        .prepare<[], { id: string; status: string; attempts: number }>(
          "SELECT id, status, attempts FROM workflow_runs ORDER BY id",
        )
        .all()
        .map((row) => [row.id, `${row.status}/${row.attempts}`]),
    );

  it("writes a run that ends before its write-behind once, ended, and a waiting one when it is read", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowRunStore(mine);
    expect(await store.beginRun(run("run_1"), 1_000, rerunnable)).toMatchObject({ outcome: "started" });
    expect(await store.beginRun(run("run_2"), 1_000, rerunnable)).toMatchObject({ outcome: "started" });
    expect(onFile(other)).toEqual({});
    await store.finishRun({ ...run("run_1"), attempts: 1, status: "success", endedAt: 1_005 });
    expect(onFile(other)).toEqual({ run_1: "success/1" });
    // A read answers as if every begin had been written at once: it writes the waiting ones first.
    expect(await store.getRun("p_a", "run_2")).toMatchObject({ status: "running", attempts: 1 });
    expect(onFile(other)).toEqual({ run_1: "success/1", run_2: "running/1" });
    await store.finishRun({ ...run("run_2"), attempts: 1, status: "error", endedAt: 1_009 });
    expect(onFile(other)).toEqual({ run_1: "success/1", run_2: "error/1" });
  });

  it("writes a begun run that has not ended as running within twice the write-behind delay", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowRunStore(mine, { beginWriteDelayMs: 10 });
    await store.beginRun(run("run_1"), 1_000, rerunnable);
    await eventually(() => when(onFile(other).run_1 === "running/1"), "the begin written", { timeoutMs: 2_000 });
  });

  it("answers claims from a waiting begin: busy while its lease holds, then a take-over whose finish alone counts", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowRunStore(mine);
    await store.beginRun(run("run_1", { leaseUntilMs: 2_000 }), 1_000, rerunnable);
    expect(await store.beginRun(run("run_1"), 1_500, rerunnable)).toEqual({ outcome: "busy", leaseUntilMs: 2_000 });
    expect(await store.beginRun(run("run_1", { leaseUntilMs: 9_000 }), 2_001, rerunnable)).toMatchObject({
      outcome: "started",
      run: { attempts: 2 },
    });
    // The first attempt's runner was taken over: its finish is left out.
    await store.finishRun({ ...run("run_1"), attempts: 1, status: "success" });
    expect(onFile(other)).toEqual({});
    await store.finishRun({ ...run("run_1"), attempts: 2, status: "exited" });
    expect(onFile(other)).toEqual({ run_1: "exited/2" });
    expect(await store.beginRun(run("run_1"), 3_000, rerunnable)).toEqual({ outcome: "done" });
  });

  it("forgets a waiting begin when its workflow's runs are deleted, so its finish brings nothing back", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowRunStore(mine);
    await store.beginRun(run("run_1"), 1_000, rerunnable);
    await store.deleteRuns("p_a");
    await store.finishRun({ ...run("run_1"), attempts: 1, status: "success" });
    expect(onFile(other)).toEqual({});
    expect(await store.listRuns("p_a", { limit: 10 })).toEqual({ items: [], totalCount: 0 });
  });

  it("takes back a waiting begin of a group that failed, so its write alone starts the run", async () => {
    const store = new SqliteWorkflowRunStore(openSqlite(":memory:"));
    const results = await Promise.allSettled([
      store.beginRun(run("run_ok"), 1_000, rerunnable),
      store.beginRun(run("run_bad", { eventPreview: { n: 1n } as never }), 1_000),
    ]);
    expect(results.map((r) => (r.status === "fulfilled" ? r.value.outcome : "rejected"))).toEqual([
      "started",
      "rejected",
    ]);
    expect((await store.listRuns("p_a", { limit: 10 })).items.map((r) => [r.id, r.attempts])).toEqual([["run_ok", 1]]);
  });

  it("writes waiting begins on flush, before the file is closed", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowRunStore(mine);
    await store.beginRun(run("run_1"), 1_000, rerunnable);
    store.flush();
    mine.close();
    expect(onFile(other)).toEqual({ run_1: "running/1" });
  });
});

describe("SqliteWorkflowRunStore at start", () => {
  it("lets a queued run left running be taken over at once, ends one that was not queued, and leaves ended runs alone", async () => {
    const { mine, other } = sharedFile();
    const crashed = new SqliteWorkflowRunStore(mine);
    for (const id of ["run_queued", "run_waited", "run_done"]) {
      await crashed.beginRun(run(id, { leaseUntilMs: 50_000 }), 1_000);
    }
    await crashed.finishRun({ ...run("run_done"), attempts: 1, status: "success", leaseUntilMs: 50_000 });
    // The run queue's row of the queued run's job (a custom-response run has none).
    const job = {
      kind: "workflow",
      workflowId: "p_a",
      runId: "run_queued",
      trigger: "http",
      triggerId: "hi_a",
      event: {},
    };
    mine.prepare("INSERT INTO run_jobs (job) VALUES (?)").run(JSON.stringify(job));
    // A row that is not JSON is dropped by the queue when read; it must not fail this.
    mine.prepare("INSERT INTO run_jobs (job) VALUES (?)").run("{not json");
    mine.close();

    const restarted = new SqliteWorkflowRunStore(other);
    expect(await restarted.beginRun(run("run_queued"), 2_000)).toEqual({ outcome: "busy", leaseUntilMs: 50_000 });
    expect(restarted.recoverAtStart(3_000)).toEqual({ released: 1, ended: 1 });
    expect(await restarted.beginRun(run("run_queued"), 3_000)).toMatchObject({
      outcome: "started",
      run: { attempts: 2 },
    });
    expect(await restarted.getRun("p_a", "run_waited")).toMatchObject({
      status: "error",
      leaseUntilMs: 0,
      endedAt: 3_000,
      durationMs: 2_000,
      error: { code: SERVER_STOPPED_ERROR, cellId: "", message: expect.stringContaining("server stopped") },
    });
    expect(await restarted.beginRun(run("run_waited"), 3_000)).toEqual({ outcome: "done" });
    expect(await restarted.beginRun(run("run_done"), 3_000)).toEqual({ outcome: "done" });
  });
});

describe("SqliteWorkflowStore cache", () => {
  it("sees a write made by another connection to the file from the next turn of the event loop", async () => {
    const { mine, other } = sharedFile();
    const store = new SqliteWorkflowStore(mine);
    const cli = new SqliteWorkflowStore(other);
    await store.createWorkflow(workflow("first"));
    expect((await store.findWorkflowByHttpKey("key-a"))?.name).toBe("first");
    expect((await store.getWorkflow("p_a"))?.name).toBe("first");

    await cli.updateWorkflow(workflow("second"));
    await nextTurn();
    expect((await store.findWorkflowByHttpKey("key-a"))?.name).toBe("second");
    expect((await store.getWorkflow("p_a"))?.name).toBe("second");

    await cli.deleteWorkflow("p_a");
    await nextTurn();
    expect(await store.findWorkflowByHttpKey("key-a")).toBeUndefined();
  });
});

describe("SqliteWorkflowStore lookups by HTTP key", () => {
  it("remembers a key that names no workflow, and forgets it when a workflow takes the key, here or in another process", async () => {
    const { mine, other } = sharedFile();
    const queries = countQueries(mine);
    const reader = new SqliteWorkflowStore(mine);
    const writer = new SqliteWorkflowStore(other);
    expect(await reader.findWorkflowByHttpKey("key-a")).toBeUndefined();
    await nextTurn();
    const afterFirst = queries.count;
    expect(await reader.findWorkflowByHttpKey("key-a")).toBeUndefined();
    // The second miss was answered from memory: only the cache's version check read the file.
    expect(afterFirst).toBeGreaterThan(0);
    expect(queries.count - afterFirst).toBe(1);

    // Another connection (another process) creates the workflow: seen from the next turn on.
    await writer.createWorkflow(workflow("Orders"));
    await nextTurn();
    expect((await reader.findWorkflowByHttpKey("key-a"))?.name).toBe("Orders");

    // This store's own writes forget what it knew at once.
    expect(await reader.findWorkflowByHttpKey("key-b")).toBeUndefined();
    const renamed = workflow("Renamed");
    await reader.updateWorkflow({
      ...renamed,
      triggers: [{ type: "http", id: "hi_b", key: "key-b", customResponse: false, createdAt: 0, updatedAt: 0 }],
    });
    expect((await reader.findWorkflowByHttpKey("key-b"))?.name).toBe("Renamed");
    expect(await reader.findWorkflowByHttpKey("key-a")).toBeUndefined();
  });
});

/** Counts the statements run on a connection, by wrapping `prepare`d statements' `get`. */
function countQueries(db: ReturnType<typeof openSqlite>) {
  const counter = { count: 0 };
  const prepare = db.prepare.bind(db);
  (db as { prepare: typeof db.prepare }).prepare = ((source: string) => {
    const statement = prepare(source);
    const get = statement.get.bind(statement);
    statement.get = ((...args: unknown[]) => {
      counter.count++;
      return get(...(args as []));
    }) as typeof statement.get;
    return statement;
  }) as typeof db.prepare;
  return counter;
}
