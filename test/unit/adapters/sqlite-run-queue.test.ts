import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqlite, type SqliteDatabase } from "#adapters/local/sqlite-database";
import { SqliteEventStore } from "#adapters/local/sqlite-event-store";
import { SqliteOutbox } from "#adapters/local/sqlite-outbox";
import { SqliteRunQueue } from "#adapters/local/sqlite-run-queue";
import { loadLocalConfig } from "#config/env";
import { DomainError } from "#core/errors";
import { silentLogger } from "#core/ports/logger";
import { jobTarget, RunBusyError, type RunJob, type SourceRunJob } from "#core/ports/run-queue";
import { DATABASE_FILE, localDeps } from "#local-mode/composition";
import { newDataDir } from "../../support/local-process.ts";
import { recordingLogger } from "../../support/recording-logger.ts";

const job = (sourceId: string): SourceRunJob => ({
  sourceId,
  trigger: "http",
  event: { sourceId, body: { é: [1, null] } },
});

/** Jobs the queue started, each finished by hand with `finish(sourceId)` or `fail(sourceId)`. */
function controlledRuns() {
  const started: string[] = [];
  const settle = new Map<string, { resolve: () => void; reject: (error: Error) => void }>();
  const run = (queued: SourceRunJob) =>
    new Promise<void>((resolve, reject) => {
      started.push(queued.sourceId);
      settle.set(queued.sourceId, { resolve, reject });
    });
  return {
    run,
    started,
    finish: (sourceId: string) => settle.get(sourceId)?.resolve(),
    fail: (sourceId: string, error: Error) => settle.get(sourceId)?.reject(error),
  };
}

/** Runs of jobs made by `numbered`, named `<source>:<n>` as they start, each ended by hand with `ends.get(name)()`. */
function namedRuns() {
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  const run = (queued: SourceRunJob) =>
    new Promise<void>((resolve) => {
      const name = `${queued.sourceId}:${(queued.event as { n: number }).n}`;
      started.push(name);
      ends.set(name, resolve);
    });
  return { started, ends, run };
}

const numbered = (sourceId: string, n: number): SourceRunJob => ({ sourceId, trigger: "http", event: { n } });

/** Runs that end at once, recording their jobs. */
function instantRuns() {
  const ran: SourceRunJob[] = [];
  return { ran, run: async (queued: SourceRunJob) => void ran.push(queued) };
}

const rowsOf = (db: SqliteDatabase) =>
  db
    .prepare<[], { job: string }>("SELECT job FROM run_jobs ORDER BY seq")
    .all()
    .map((row) => (JSON.parse(row.job) as SourceRunJob).sourceId);

const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe("SqliteRunQueue", () => {
  it("has the job's row committed when enqueue resolves, with the job as given", async () => {
    const db = openSqlite(":memory:");
    const queue = new SqliteRunQueue(db, { run: instantRuns().run, log: recordingLogger() });
    const pending = queue.enqueue(job("dc_1"));
    await pending;
    const rows = db.prepare<[], { job: string }>("SELECT job FROM run_jobs").all();
    expect(rows.map((row) => JSON.parse(row.job))).toEqual([job("dc_1")]);
  });

  it("runs nothing before start, then at most `concurrency` jobs at once in arrival order, deleting each row when its run ends", async () => {
    const db = openSqlite(":memory:");
    const runs = controlledRuns();
    const queue = new SqliteRunQueue(db, { run: runs.run, log: recordingLogger(), concurrency: 2 });
    await Promise.all(["dc_1", "dc_2", "dc_3", "dc_4"].map((id) => queue.enqueue(job(id))));
    expect(runs.started).toEqual([]);
    queue.start();
    expect(runs.started).toEqual(["dc_1", "dc_2"]);
    expect(queue.pending).toBe(4);

    runs.finish("dc_2");
    await expect.poll(() => runs.started).toEqual(["dc_1", "dc_2", "dc_3"]);
    await expect.poll(() => rowsOf(db)).toEqual(["dc_1", "dc_3", "dc_4"]);
    runs.finish("dc_1");
    await expect.poll(() => runs.started).toEqual(["dc_1", "dc_2", "dc_3", "dc_4"]);
    runs.finish("dc_3");
    runs.finish("dc_4");
    await queue.drain(60_000);
    await expect.poll(() => queue.size()).toBe(0);
  });

  it("writes the enqueues of one turn of the event loop together, each resolving after the commit", async () => {
    const db = openSqlite(":memory:");
    const queue = new SqliteRunQueue(db, { run: instantRuns().run, log: recordingLogger() });
    let resolved = 0;
    const all = Array.from({ length: 50 }, (_, n) => queue.enqueue(job(`dc_${n}`)).then(() => resolved++));
    // Nothing is written, nor resolved, before the grouped write.
    expect(queue.size()).toBe(0);
    await Promise.resolve();
    expect(resolved).toBe(0);
    await Promise.all(all);
    expect(rowsOf(db)).toEqual(Array.from({ length: 50 }, (_, n) => `dc_${n}`));
  });

  it("re-runs at start every job a stopped process left (unfinished or never started), before new ones", async () => {
    const folder = mkdtempSync(join(tmpdir(), "sluice-run-queue-"));
    folders.push(folder);
    const file = join(folder, "sluice.db");
    const before = openSqlite(file);
    const first = controlledRuns();
    const dead = new SqliteRunQueue(before, { run: first.run, log: recordingLogger(), concurrency: 1 });
    await dead.enqueue(job("dc_running"));
    await dead.enqueue(job("dc_waiting"));
    dead.start();
    expect(first.started).toEqual(["dc_running"]);
    // The process dies: nothing more is written.
    before.close();

    const after = openSqlite(file);
    const again = instantRuns();
    const queue = new SqliteRunQueue(after, { run: again.run, log: recordingLogger(), recoveryPageSize: 1 });
    await queue.enqueue(job("dc_new"));
    queue.start();
    await queue.drain(60_000);
    expect(again.ran).toEqual([job("dc_running"), job("dc_waiting"), job("dc_new")]);
    await expect.poll(() => queue.size()).toBe(0);
    after.close();
  });

  it("reads a long backlog back a page at a time, in order", async () => {
    const db = openSqlite(":memory:");
    const left = new SqliteRunQueue(db, { run: instantRuns().run, log: recordingLogger() });
    await Promise.all(Array.from({ length: 7 }, (_, n) => left.enqueue(job(`dc_${n}`))));
    const runs = controlledRuns();
    const queue = new SqliteRunQueue(db, {
      run: runs.run,
      log: recordingLogger(),
      recoveryPageSize: 3,
      concurrency: 2,
    });
    queue.start();
    // Only the jobs read so far are in memory: one page.
    expect(runs.started).toEqual(["dc_0", "dc_1"]);
    expect(queue.pending).toBe(3);
    for (let n = 0; n < 7; n++) {
      await expect.poll(() => runs.started.length).toBeGreaterThan(n);
      runs.finish(`dc_${n}`);
    }
    await queue.drain(60_000);
    expect(runs.started).toEqual(Array.from({ length: 7 }, (_, n) => `dc_${n}`));
    await expect.poll(() => queue.size()).toBe(0);
  });

  it("logs a failed run and keeps its row, so that it runs again at the next start; the queue goes on", async () => {
    const db = openSqlite(":memory:");
    const runs = controlledRuns();
    const errors: Record<string, unknown>[] = [];
    const queue = new SqliteRunQueue(db, { run: runs.run, log: recordingLogger(errors), concurrency: 1 });
    await queue.enqueue(job("dc_bad"));
    await queue.enqueue(job("dc_next"));
    queue.start();
    runs.fail("dc_bad", new Error("database is locked"));
    await expect.poll(() => runs.started).toEqual(["dc_bad", "dc_next"]);
    runs.finish("dc_next");
    await queue.drain(60_000);
    await expect.poll(() => rowsOf(db)).toEqual(["dc_bad"]);
    expect(errors).toEqual([expect.objectContaining({ target_id: "dc_bad", error: "Error: database is locked" })]);

    const restarted = instantRuns();
    const next = new SqliteRunQueue(db, { run: restarted.run, log: recordingLogger() });
    next.start();
    await next.drain(60_000);
    expect(restarted.ran).toEqual([job("dc_bad")]);
  });

  it("sets a job aside after three failures on Sluice's side, across starts, instead of running it at every start", async () => {
    const db = openSqlite(":memory:");
    let runsOfBad = 0;
    const ranGood: string[] = [];
    const run = async (queued: SourceRunJob) => {
      if (queued.sourceId === "dc_bad") {
        runsOfBad++;
        throw new Error(`store failed, run ${runsOfBad}`);
      }
      ranGood.push(queued.sourceId);
    };
    const first = new SqliteRunQueue(db, { run, log: recordingLogger() });
    await first.enqueue(job("dc_bad"));
    first.start();
    await first.drain(60_000);
    first.stop();
    const errors: Record<string, unknown>[] = [];
    for (let start = 2; start <= 4; start++) {
      const queue = new SqliteRunQueue(db, { run, log: recordingLogger(errors) });
      await queue.enqueue(job(`dc_good${start}`));
      queue.start();
      await queue.drain(60_000);
      queue.stop();
    }
    // Three runs (the first process's and two starts'), then the fourth start sets it aside.
    expect(runsOfBad).toBe(3);
    expect(ranGood).toEqual(["dc_good2", "dc_good3", "dc_good4"]);
    expect(rowsOf(db)).toEqual([]);
    const aside = db.prepare("SELECT job, target, attempts, last_error FROM run_jobs_set_aside").all();
    expect(aside).toEqual([
      { job: JSON.stringify(job("dc_bad")), target: null, attempts: 3, last_error: "Error: store failed, run 3" },
    ]);
    expect(errors).toContainEqual(
      expect.objectContaining({
        message: expect.stringContaining("set aside"),
        target_id: "dc_bad",
        attempts: 3,
        last_error: "Error: store failed, run 3",
      }),
    );
  });

  it("counts a left job's start before it runs, so a job that kills its process is set aside too", async () => {
    const folder = mkdtempSync(join(tmpdir(), "sluice-run-queue-"));
    folders.push(folder);
    const file = join(folder, "sluice.db");
    let starts = 0;
    for (let life = 1; life <= 5; life++) {
      const db = openSqlite(file);
      const runs = controlledRuns();
      const queue = new SqliteRunQueue(db, { run: runs.run, log: recordingLogger() });
      if (life === 1) await queue.enqueue(job("dc_killer"));
      queue.start();
      starts += runs.started.length;
      // The run never ends: the process dies in it.
      db.close();
    }
    // Started by the first process and the next three; the fifth sets it aside.
    expect(starts).toBe(4);
    const db = openSqlite(file);
    expect(rowsOf(db)).toEqual([]);
    expect(db.prepare("SELECT attempts, last_error FROM run_jobs_set_aside").all()).toEqual([
      { attempts: 3, last_error: null },
    ]);
    // The operator's way back (docs/operations.md, "Queued runs set aside"), as written there.
    const doc = readFileSync(new URL("../../../docs/operations.md", import.meta.url), "utf8");
    const statement = /"(INSERT INTO run_jobs [^"]+)"/.exec(doc)?.[1];
    expect(statement).toContain("DELETE FROM run_jobs_set_aside");
    db.exec(statement as string);
    const again = instantRuns();
    const queue = new SqliteRunQueue(db, { run: again.run, log: recordingLogger() });
    queue.start();
    await queue.drain(60_000);
    expect(again.ran).toEqual([job("dc_killer")]);
    db.close();
  });

  it("does not count a job held for a lease twice, nor a new job's start", async () => {
    const db = openSqlite(":memory:");
    const left = new SqliteRunQueue(db, { run: () => new Promise(() => {}), log: recordingLogger() });
    await left.enqueue(job("dc_leased"));
    left.stop();
    let tries = 0;
    let endSecond = () => {};
    const queue = new SqliteRunQueue(db, {
      run: () => {
        tries++;
        if (tries === 1) return Promise.reject(new RunBusyError(Date.now() + 5, "held"));
        return new Promise<void>((resolve) => {
          endSecond = resolve;
        });
      },
      log: recordingLogger(),
    });
    queue.start();
    await expect.poll(() => tries).toBe(2);
    const attempts = () => db.prepare<[], { attempts: number }>("SELECT attempts FROM run_jobs").all();
    expect(attempts()).toEqual([{ attempts: 1 }]);
    endSecond();
    await queue.drain(60_000);
    await queue.enqueue(job("dc_new"));
    await expect.poll(attempts).toEqual([{ attempts: 0 }]);
    queue.stop();
  });

  it("when the data dir refuses a write, pauses runs, tries that job alone again and resumes every run once it succeeds", async () => {
    const db = openSqlite(":memory:");
    const runs = controlledRuns();
    const errors: Record<string, unknown>[] = [];
    const queue = new SqliteRunQueue(db, {
      run: runs.run,
      log: recordingLogger(errors),
      concurrency: 2,
      retryDelayMs: 5,
    });
    for (const id of ["dc_full", "dc_2", "dc_3"]) await queue.enqueue(job(id));
    queue.start();
    expect(runs.started).toEqual(["dc_full", "dc_2"]);
    runs.fail("dc_full", new DomainError("unavailable", "the server's disk is full"));
    runs.finish("dc_2");
    // The failed job runs again, alone: dc_3 waits until a run succeeds.
    await expect.poll(() => runs.started).toEqual(["dc_full", "dc_2", "dc_full"]);
    runs.fail("dc_full", Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" }));
    await expect.poll(() => runs.started).toEqual(["dc_full", "dc_2", "dc_full", "dc_full"]);
    expect(rowsOf(db)).toContain("dc_full");
    runs.finish("dc_full");
    await expect.poll(() => runs.started).toEqual(["dc_full", "dc_2", "dc_full", "dc_full", "dc_3"]);
    runs.finish("dc_3");
    await queue.drain(60_000);
    await expect.poll(() => queue.size()).toBe(0);
    expect(errors).toEqual([]);
  });

  it("lets other sources' jobs ahead of a source that has its share of slots running, which gets the slots nothing else wants", async () => {
    const db = openSqlite(":memory:");
    const { started, ends, run } = namedRuns();
    const queue = new SqliteRunQueue(db, { run, log: recordingLogger(), concurrency: 3, perSourceConcurrency: 1 });
    for (const n of [1, 2, 3, 4]) await queue.enqueue(numbered("dc_hot", n));
    await queue.enqueue(numbered("dc_other", 1));
    queue.start();
    // dc_hot:2 waits for dc_other:1, then takes the slot nothing else wants.
    expect(started).toEqual(["dc_hot:1", "dc_other:1", "dc_hot:2"]);
    ends.get("dc_other:1")?.();
    await expect.poll(() => started.at(-1)).toBe("dc_hot:3");
    await queue.enqueue(numbered("dc_other", 2));
    ends.get("dc_hot:1")?.();
    // dc_other:2 came after dc_hot:4 but goes first: dc_hot has more than its share running.
    await expect.poll(() => started.at(-1)).toBe("dc_other:2");
    ends.get("dc_hot:2")?.();
    await expect.poll(() => started.at(-1)).toBe("dc_hot:4");
    for (const end of ends.values()) end();
    await queue.drain(60_000);
    await expect.poll(() => queue.size()).toBe(0);
    expect(queue.pending).toBe(0);
  });

  it("keeps a source's jobs past `maxHeldPerSource` only in the file and reads them back in order, without holding other sources back", async () => {
    const db = openSqlite(":memory:");
    const { started, ends, run } = namedRuns();
    const warnings: string[] = [];
    const log = { ...recordingLogger(), warn: (message: string) => void warnings.push(message) };
    const queue = new SqliteRunQueue(db, { run, log, concurrency: 1, maxHeldPerSource: 4, recoveryPageSize: 2 });
    const spilledRows = () =>
      db
        .prepare<[], { target: string; n: number }>(
          "SELECT target, count(*) AS n FROM run_jobs WHERE target IS NOT NULL GROUP BY target",
        )
        .all();
    // Ten jobs in one turn (one grouped write), then one more of another source.
    await Promise.all(Array.from({ length: 10 }, (_, index) => queue.enqueue(numbered("dc_hot", index + 1))));
    await queue.enqueue(numbered("dc_other", 1));
    expect(spilledRows()).toEqual([{ target: "dc_hot", n: 6 }]);
    expect(queue.pending).toBe(11);
    expect(warnings).toEqual(["a source's queued runs are kept in the data file only until it catches up"]);
    queue.start();
    const finish = async (name: string, next: string) => {
      ends.get(name)?.();
      await expect.poll(() => started.at(-1)).toBe(next);
    };
    expect(started).toEqual(["dc_hot:1"]);
    // dc_other:1 came after six spilled jobs of dc_hot, but was held in memory: it runs in its turn.
    await finish("dc_hot:1", "dc_hot:2");
    await finish("dc_hot:2", "dc_hot:3");
    await finish("dc_hot:3", "dc_hot:4");
    await finish("dc_hot:4", "dc_other:1");
    // While dc_hot spills, its new jobs spill too (behind the others), so its order holds.
    await queue.enqueue(numbered("dc_hot", 11));
    for (let n = 5; n <= 11; n++) await finish(n === 5 ? "dc_other:1" : `dc_hot:${n - 1}`, `dc_hot:${n}`);
    ends.get("dc_hot:11")?.();
    await queue.drain(10_000);
    expect(started).toEqual([
      ...[1, 2, 3, 4].map((n) => `dc_hot:${n}`),
      "dc_other:1",
      ...[5, 6, 7, 8, 9, 10, 11].map((n) => `dc_hot:${n}`),
    ]);
    expect(queue.pending).toBe(0);
    await expect.poll(() => queue.size()).toBe(0);
    // Spilling ended with the backlog: the next job is held in memory again.
    await queue.enqueue(numbered("dc_hot", 12));
    expect(spilledRows()).toEqual([]);
    queue.stop();
  });

  it("runs spilled jobs a stopped process left at the next start, in order", async () => {
    const folder = mkdtempSync(join(tmpdir(), "sluice-run-queue-"));
    folders.push(folder);
    const file = join(folder, "q.db");
    const first = openSqlite(file);
    const stopped = new SqliteRunQueue(first, { run: instantRuns().run, log: recordingLogger(), maxHeldPerSource: 3 });
    await Promise.all(Array.from({ length: 8 }, (_, index) => stopped.enqueue(numbered("dc_hot", index + 1))));
    expect(first.prepare("SELECT count(*) AS n FROM run_jobs WHERE target IS NOT NULL").get()).toEqual({ n: 5 });
    stopped.stop();
    first.close();
    const second = openSqlite(file);
    const runs = instantRuns();
    const queue = new SqliteRunQueue(second, { run: runs.run, log: recordingLogger(), maxHeldPerSource: 3 });
    queue.start();
    await queue.drain(10_000);
    expect(runs.ran.map((ran) => (ran.event as { n: number }).n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    await expect.poll(() => queue.size()).toBe(0);
    queue.stop();
    second.close();
  });

  it("holds a job whose run another runner holds (RunBusyError) until the lease ends, keeping its row, then runs it", async () => {
    const db = openSqlite(":memory:");
    const tries: number[] = [];
    const run = async (queued: RunJob) => {
      tries.push(Date.now());
      if (tries.length === 1) throw new RunBusyError(Date.now() + 200, `${jobTarget(queued)} is held`);
    };
    const queue = new SqliteRunQueue(db, { run, log: recordingLogger() });
    const workflowJob: RunJob = {
      kind: "workflow",
      workflowId: "p_1",
      runId: "run_1",
      trigger: "timer",
      triggerId: "ti_1",
      event: {},
    };
    await queue.enqueue(workflowJob);
    queue.start();
    await expect.poll(() => tries.length).toBe(1);
    expect(queue.pending).toBe(1);
    expect(db.prepare("SELECT count(*) AS n FROM run_jobs").get()).toEqual({ n: 1 });
    await expect.poll(() => tries.length, { timeout: 3_000 }).toBe(2);
    expect((tries[1] as number) - (tries[0] as number)).toBeGreaterThanOrEqual(150);
    await expect.poll(() => db.prepare("SELECT count(*) AS n FROM run_jobs").get()).toEqual({ n: 0 });
    queue.stop();
  });

  it("rejects an enqueue whose row could not be written", async () => {
    const db = openSqlite(":memory:");
    const queue = new SqliteRunQueue(db, { run: instantRuns().run, log: recordingLogger() });
    db.close();
    await expect(queue.enqueue(job("dc_1"))).rejects.toThrow(/not open/);
  });

  it("after stop, starts nothing more, and writes later enqueues at once for the next start", async () => {
    const db = openSqlite(":memory:");
    const runs = controlledRuns();
    const queue = new SqliteRunQueue(db, { run: runs.run, log: recordingLogger(), concurrency: 1 });
    await queue.enqueue(job("dc_1"));
    await queue.enqueue(job("dc_2"));
    queue.start();
    queue.stop();
    await queue.enqueue(job("dc_3"));
    expect(rowsOf(db)).toEqual(["dc_1", "dc_2", "dc_3"]);
    runs.finish("dc_1");
    await expect.poll(() => rowsOf(db)).toEqual(["dc_2", "dc_3"]);
    expect(runs.started).toEqual(["dc_1"]);
  });

  it("drains at once when not started, and stops waiting for a job that never ends after the time limit", async () => {
    const db = openSqlite(":memory:");
    const runs = controlledRuns();
    const queue = new SqliteRunQueue(db, { run: runs.run, log: recordingLogger() });
    await queue.enqueue(job("dc_stuck"));
    await queue.drain(60_000);
    queue.start();
    await queue.drain(20);
    expect(queue.pending).toBe(1);
  });
});

describe("localDeps and what a previous process left", () => {
  it("runs the queued runs and routes the unrouted appends a previous process left, before any request", async () => {
    const dataDir = newDataDir();
    folders.push(dataDir);
    // A process that stopped with a run queued and an append not yet routed.
    const before = openSqlite(join(dataDir, DATABASE_FILE));
    await new SqliteRunQueue(before, { run: instantRuns().run, log: recordingLogger() }).enqueue(job("dc_gone"));
    await new SqliteEventStore(before, { outbox: new SqliteOutbox(before) }).appendEvents(
      "dc_gone",
      [{ channel: "", event: 1, emitId: "e1", meta: {} }],
      Date.now(),
    );
    before.close();
    const left = () => {
      const db = openSqlite(join(dataDir, DATABASE_FILE));
      const count = (table: string) => db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${table}`).get()?.n;
      const counts = { runs: count("run_jobs"), outbox: count("event_outbox") };
      db.close();
      return counts;
    };
    const config = loadLocalConfig({ PORT: "0", SLUICE_DATA_DIR: dataDir });

    expect(left()).toEqual({ runs: 1, outbox: 1 });

    // The server: the append is routed (nobody listens) and the run made (its source is gone) before
    // any request, and their rows removed.
    const server = await localDeps(config, silentLogger);
    await server.close();
    expect(left()).toEqual({ runs: 0, outbox: 0 });
  });
});
