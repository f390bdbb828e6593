import { describe, expect, it } from "vitest";
import * as z from "zod";
import { jsonLogger } from "#core/ports/logger";
import type { RunJob, WorkflowRunJob } from "#core/ports/run-queue";
import { internalHandler } from "#internal/internal-handler";
import { runJobSchema } from "#internal/source-runner";
import { memoryDeps } from "../../support/memory-deps.ts";

function setup() {
  const lines: Record<string, unknown>[] = [];
  const deps = { ...memoryDeps(), log: jsonLogger({}, (line) => lines.push(JSON.parse(line))) };
  const inputs: unknown[] = [];
  const handler = internalHandler(
    "test job",
    z.object({ n: z.number() }),
    async (_deps, input) => {
      inputs.push(input);
      if (input.n < 0) throw new Error("store down");
    },
    async () => deps,
  );
  return { handler, inputs, lines };
}

describe("internalHandler", () => {
  it("runs the use case with the parsed event", async () => {
    const { handler, inputs, lines } = setup();
    await handler({ n: 1, extra: "dropped by the schema" });
    expect(inputs).toEqual([{ n: 1 }]);
    expect(lines).toEqual([]);
  });

  it("logs and drops a malformed event without running anything, as a retry cannot fix it", async () => {
    const { handler, inputs, lines } = setup();
    await expect(handler({ n: "one" })).resolves.toBeUndefined();
    expect(inputs).toEqual([]);
    expect(lines).toMatchObject([{ level: "error", message: "malformed test job dropped", issues: [{ path: ["n"] }] }]);
  });

  it("throws the use case's failure, so that Lambda's retry setting applies", async () => {
    const { handler } = setup();
    await expect(handler({ n: -1 })).rejects.toThrow("store down");
  });
});

describe("the source runner's event", () => {
  it("is what LambdaRunQueue sends: a RunJob as JSON", () => {
    const job: RunJob = {
      sourceId: "dc_01kab00000abcdefghjkmn",
      trigger: "http",
      event: { method: "POST", body: null },
    };
    expect(runJobSchema.parse(JSON.parse(JSON.stringify(job)))).toEqual(job);
    expect(runJobSchema.safeParse({ ...job, sourceId: "o_x" }).success).toBe(false);
  });

  it("is a workflow's job too, with its run id; a source job from before workflows (no kind) still parses", () => {
    const job: WorkflowRunJob = {
      kind: "workflow",
      workflowId: "p_01kab00000abcdefghjkmn",
      runId: "run_01kab00000abcdefghjkmn",
      trigger: "http",
      triggerId: "hi_01kab00000abcdefghjkmn",
      event: { method: "POST", body: null },
      hops: 2,
    };
    expect(runJobSchema.parse(JSON.parse(JSON.stringify(job)))).toEqual(job);
    expect(runJobSchema.safeParse({ ...job, workflowId: "dc_x" }).success).toBe(false);
    expect(runJobSchema.safeParse({ ...job, runId: undefined }).success).toBe(false);
    expect(runJobSchema.safeParse({ ...job, kind: "source" }).success).toBe(false);
    const old = { sourceId: "dc_01kab00000abcdefghjkmn", trigger: "event", event: 1 };
    expect(runJobSchema.parse(old)).toEqual(old);
  });
});
