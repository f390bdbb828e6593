import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RESPOND_TIMEOUT_RESPONSE } from "#core/http-run-event";
import { jsonLogger } from "#core/ports/logger";
import type { RunJob } from "#core/ports/run-queue";
import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";
import { keepPause, newFlowBase } from "#core/workflow-pauses";
import { ANSWER_MARGIN_MS, httpInterfaceHandler } from "#internal/endpoint-function";
import { memoryDeps } from "../../support/memory-deps.ts";
import { scriptedSource } from "../../support/scripted-sources.ts";

const recorded = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/http-interface.json", import.meta.url), "utf8"),
);

/** The recorded catch-all event sent to `key`. */
const eventFor = (key: string) => ({
  ...recorded,
  rawPath: `/http/${key}/hooks/github`,
  pathParameters: { key, proxy: "hooks/github" },
});

describe("the endpoint function's request line (AWS)", () => {
  it("names the source reached and the status, never the key, the rest of the path or the query", async () => {
    const { deps, source, endpointKey } = await scriptedSource(async () => ({}));
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const handler = httpInterfaceHandler(async () => deps);

    const result = await handler(eventFor(endpointKey), { awsRequestId: "req-1" });
    expect(result.statusCode).toBe(200);
    const unknown = await handler(eventFor("unknownkey123"), { awsRequestId: "req-2" });
    expect(unknown.statusCode).toBe(404);

    const requests = lines.filter((line) => line.message === "request");
    expect(requests).toEqual([
      expect.objectContaining({
        method: "POST",
        path: "/http/{key}",
        status: 200,
        request_id: "req-1",
        source_id: source.id,
        duration_ms: expect.any(Number),
      }),
      expect.objectContaining({ method: "POST", path: "/http/{key}", status: 404, request_id: "req-2" }),
    ]);
    expect(requests[1]).not.toHaveProperty("source_id");
    const logged = JSON.stringify(lines);
    for (const hidden of [endpointKey, "unknownkey123", "hooks/github", "a=1"]) expect(logged).not.toContain(hidden);
  });
});

describe("the endpoint function's custom responses (AWS)", () => {
  it("ends the run before the function's own time is up, so a run that times out gets its answer and its events", async () => {
    const { deps, calls, endpointKey, channel } = await scriptedSource(
      async (invocation) => ({
        emits: [{ event: { seen: true }, meta: {} }],
        error: { name: "TimeoutError", message: `timed out after ${invocation.timeoutMs} ms`, ts: 0 },
      }),
      { customResponse: true },
    );
    const handler = httpInterfaceHandler(async () => deps);
    // 4 s left: the run gets what remains but the margin to store and answer.
    const result = await handler(eventFor(endpointKey), {
      awsRequestId: "req-1",
      getRemainingTimeInMillis: () => 4_000,
    });
    expect(calls.at(-1)?.timeoutMs).toBe(4_000 - ANSWER_MARGIN_MS);
    expect(result.statusCode).toBe(RESPOND_TIMEOUT_RESPONSE.status);
    expect((await channel("")).map((stored) => stored.event)).toEqual([{ seen: true }]);

    // Plenty of time left: the run's own limit (5 s in these deps) stands.
    await handler(eventFor(endpointKey), { awsRequestId: "req-2", getRemainingTimeInMillis: () => 60_000 });
    expect(calls.at(-1)?.timeoutMs).toBe(deps.runtime.invocationTimeoutMs);
  });
});

describe("the endpoint function's paused-run URLs (AWS)", () => {
  /** A run paused as `$.flow.suspend` keeps it, and the recorded event sent to its URL for `action`. */
  async function pausedRun() {
    const queued: RunJob[] = [];
    const deps = memoryDeps(Date.UTC(2026, 10, 27), { runs: { enqueue: async (job) => void queued.push(job) } });
    const base = newFlowBase(deps, "run_a");
    const secret = base.split("/").at(-1) as string;
    const workflow = { id: "p_a", deploymentId: "d_1", steps: [{ id: "c_ask", namespace: "ask" }] } as WorkflowRecord;
    await keepPause(
      deps,
      workflow,
      { kind: "workflow", workflowId: "p_a", runId: "run_a", trigger: "http", triggerId: "hi_1", event: {} },
      { id: "run_a", trigger: { type: "http", id: "hi_1" } } as WorkflowRun,
      base,
      { kind: "suspend", stepId: "c_ask", afterMs: 60_000, steps: {} },
      undefined,
      "k_1",
      deps.clock.nowMs(),
    );
    // The workflow is there and active: its pause may be resumed.
    deps.workflows.getWorkflow = async (id) => (id === "p_a" ? { ...workflow, active: true } : undefined);
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const flowEvent = (action: string, runId = "run_a", token = secret) => ({
      ...recorded,
      routeKey: "ANY /flow/{run_id}/{secret}/{action}",
      rawPath: `/flow/${runId}/${token}/${action}`,
      rawQueryString: "note=ok",
      headers: { ...recorded.headers, "content-type": "application/json" },
      body: Buffer.from('{"approved":true}').toString("base64"),
      pathParameters: { run_id: runId, secret: token, action },
    });
    return { deps, queued, secret, lines, flowEvent, handler: httpInterfaceHandler(async () => deps) };
  }

  it("resumes the run with the request as API Gateway delivers it, and logs no secret", async () => {
    const { deps, queued, secret, lines, flowEvent, handler } = await pausedRun();
    const result = await handler(flowEvent("resume"), { awsRequestId: "req-1" });
    expect(result.statusCode).toBe(202);
    expect(JSON.parse(String(result.body))).toEqual({ status: "resumed", run_id: "run_a" });
    expect(queued).toEqual([expect.objectContaining({ workflowId: "p_a", resume: { pauseId: "run_a" } })]);
    expect((await deps.pausedRuns.get("run_a"))?.dispatch?.request).toMatchObject({
      method: "POST",
      path: "/",
      query: { note: "ok" },
      body: { approved: true },
      client_ip: "203.0.113.10",
      url: `https://abcd1234.execute-api.eu-west-1.amazonaws.com/flow/run_a/${secret}/resume?note=ok`,
    });
    // The other URL, once resumed: 409.
    expect((await handler(flowEvent("cancel"), { awsRequestId: "req-2" })).statusCode).toBe(409);
    const requests = lines.filter((line) => line.message === "request");
    expect(requests).toEqual([
      expect.objectContaining({ method: "POST", path: "/flow/{run_id}/{secret}/{action}", status: 202 }),
      expect.objectContaining({ method: "POST", path: "/flow/{run_id}/{secret}/{action}", status: 409 }),
    ]);
    expect(JSON.stringify(lines)).not.toContain(secret);
  });

  it("answers 404 to a wrong secret, an unknown run and a path that is no pause URL, and takes nothing", async () => {
    const { deps, queued, secret, flowEvent, handler } = await pausedRun();
    for (const event of [
      flowEvent("resume", "run_a", "A".repeat(24)),
      flowEvent("resume", "run_b"),
      flowEvent("pause"),
      flowEvent("resume", "run_a", "short"),
      flowEvent("resume", "not_a_run", secret),
    ]) {
      expect((await handler(event, { awsRequestId: "req" })).statusCode, event.rawPath).toBe(404);
    }
    expect(queued).toEqual([]);
    expect((await deps.pausedRuns.get("run_a"))?.dispatch).toBeUndefined();
  });
});
