import { describe, expect, it } from "vitest";
import { InProcessRunQueue } from "#adapters/local/in-process-run-queue";
import type { Logger } from "#ports/logger";
import type { RunJob } from "#ports/run-queue";

const job = (sourceId: string): RunJob => ({ sourceId, trigger: "http", event: { sourceId } });

/** Jobs the queue started, each finished by hand with `finish(sourceId)` or `fail(sourceId)`. */
function controlledRuns() {
  const started: string[] = [];
  const settle = new Map<string, { resolve: () => void; reject: (error: Error) => void }>();
  const run = (queued: RunJob) =>
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

function recordingLogger(errors: Record<string, unknown>[]): Logger {
  const logger: Logger = {
    info() {},
    warn() {},
    error: (message, fields) => errors.push({ message, ...fields }),
    child: () => logger,
  };
  return logger;
}

describe("InProcessRunQueue", () => {
  it("runs at most `concurrency` jobs at once, the rest in arrival order as slots free up", async () => {
    const runs = controlledRuns();
    const queue = new InProcessRunQueue({ run: runs.run, log: recordingLogger([]), concurrency: 2 });
    for (const id of ["dc_1", "dc_2", "dc_3", "dc_4"]) await queue.enqueue(job(id));
    expect(runs.started).toEqual(["dc_1", "dc_2"]);
    expect(queue.pending).toBe(4);

    runs.finish("dc_2");
    await expect.poll(() => runs.started).toEqual(["dc_1", "dc_2", "dc_3"]);
    runs.finish("dc_1");
    await expect.poll(() => runs.started).toEqual(["dc_1", "dc_2", "dc_3", "dc_4"]);
    expect(queue.pending).toBe(2);
  });

  it("logs a failed job and goes on with the next", async () => {
    const runs = controlledRuns();
    const errors: Record<string, unknown>[] = [];
    const queue = new InProcessRunQueue({ run: runs.run, log: recordingLogger(errors), concurrency: 1 });
    await queue.enqueue(job("dc_bad"));
    await queue.enqueue(job("dc_next"));
    runs.fail("dc_bad", new Error("run exploded"));
    await expect.poll(() => runs.started).toEqual(["dc_bad", "dc_next"]);
    expect(errors).toEqual([
      { message: "a queued source run failed", source_id: "dc_bad", error: "Error: run exploded" },
    ]);
  });

  it("drains: resolves once every queued and running job is done", async () => {
    const runs = controlledRuns();
    const queue = new InProcessRunQueue({ run: runs.run, log: recordingLogger([]), concurrency: 1 });
    await queue.enqueue(job("dc_1"));
    await queue.enqueue(job("dc_2"));
    let drained = false;
    const draining = queue.drain(60_000).then(() => {
      drained = true;
    });
    runs.finish("dc_1");
    await expect.poll(() => runs.started).toHaveLength(2);
    expect(drained).toBe(false);
    runs.finish("dc_2");
    await draining;
    expect(queue.pending).toBe(0);
    await queue.drain(60_000);
  });

  it("stops waiting for a job that never ends after the drain's time limit", async () => {
    const runs = controlledRuns();
    const queue = new InProcessRunQueue({ run: runs.run, log: recordingLogger([]) });
    await queue.enqueue(job("dc_stuck"));
    await queue.drain(20);
    expect(queue.pending).toBe(1);
  });
});
