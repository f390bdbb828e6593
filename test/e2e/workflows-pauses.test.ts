import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Pausing a run (docs/workflows.md "Pausing a run"): `$.flow.suspend`, `$.flow.delay` and
 * `$.flow.rerun` in the real sandbox of `npm start`, their URLs requested over real HTTP, a stand-in
 * job service on 127.0.0.1 that is polled and that calls back, and a restart of the server in between.
 */
const step = (body: string) => `export default defineComponent({ async run({ steps, $ }) { ${body} } })`;

/** The first step of most workflows here: pauses as asked and emits the pause's URLs, so the test can use them. */
const pausing = (call: string) =>
  step(`const urls = ${call}; $.send.emit({ raw_event: { urls } }); return "paused here";`);

/** A job service: `POST /jobs` starts a job (done after `pollsToDone` polls); `GET /jobs/<id>` polls it. */
class JobService {
  readonly jobs = new Map<string, { polls: number; callback?: string }>();
  private server!: Server;
  url = "";

  constructor(private readonly pollsToDone: number) {}

  async start(): Promise<this> {
    this.server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => (body += chunk));
      request.on("end", () => {
        const answer = (status: number, json: unknown) => {
          response.writeHead(status, { "content-type": "application/json" });
          response.end(JSON.stringify(json));
        };
        if (request.method === "POST" && request.url === "/jobs") {
          const id = `job-${this.jobs.size + 1}`;
          const { callback_url: callback } = JSON.parse(body || "{}") as { callback_url?: string };
          this.jobs.set(id, { polls: 0, ...(callback ? { callback } : {}) });
          return answer(201, { id, status: "running" });
        }
        const job = this.jobs.get(request.url?.replace("/jobs/", "") ?? "");
        if (!job) return answer(404, { error: "no such job" });
        job.polls += 1;
        return answer(200, { status: job.polls >= this.pollsToDone ? "done" : "running", polls: job.polls });
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  stop = () => new Promise<void>((resolve) => this.server.close(() => resolve()));
}

describe("pausing workflow runs over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let jobs: JobService;

  async function workflowOf(steps: Record<string, string>, customResponse = false) {
    const created = await api("POST", "/workflows", {
      settings: { name: "pauses", auto_deploy: true },
      steps: Object.entries(steps).map(([namespace, code]) => ({ namespace, component_code: code })),
      triggers: [{ type: "http", props: { custom_response: customResponse } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    return {
      id: created.json.data.id as string,
      url: created.json.data.triggers[0].endpoint_url as string,
    };
  }

  const trigger = async (flow: { url: string }, body: unknown) => {
    const answer = await fetch(flow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: answer.status, text: await answer.text() };
  };

  const runs = async (flowId: string) => (await api("GET", `/workflows/${flowId}/runs?limit=100`)).json.data;
  const emits = async (flowId: string) =>
    (
      (await api("GET", `/workflows/${flowId}/event_summaries?expand=event&limit=100`)).json.data as {
        event: { raw_event: Record<string, unknown> };
      }[]
    )
      .map((summary) => summary.event.raw_event)
      .reverse();
  const errors = async (flowId: string) =>
    (await api("GET", `/workflows/${flowId}/$errors/event_summaries?expand=event`)).json.data;

  /** Waits for the run that paused: its record, and the URLs its first step emitted. */
  async function pausedRun(flowId: string) {
    return eventually(async () => {
      const paused = (await runs(flowId)).find((run: { status: string }) => run.status === "paused");
      const urls = (await emits(flowId)).find((emit) => emit.urls)?.urls as
        | { resume_url: string; cancel_url: string }
        | undefined;
      return paused && urls ? { run: paused, urls } : undefined;
    }, `a paused run of ${flowId}`);
  }

  const runWith = (flowId: string, status: string) =>
    eventually(
      async () => (await runs(flowId)).find((run: { status: string }) => run.status === status),
      `a ${status} run of ${flowId}`,
    );

  beforeAll(async () => {
    jobs = await new JobService(3).start();
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
    await jobs?.stop();
  });

  it("suspends until the resume URL is requested; the rest of the run sees $resume_data and the earlier steps", async () => {
    const flow = await workflowOf({
      ask: pausing("$.flow.suspend()"),
      after: step(`$.send.emit({ raw_event: { resumed: steps.ask.$resume_data, ask: steps.ask.$return_value,
        order: steps.trigger.event.body.order, id: $.context.id, runs: $.context.run.runs } });`),
    });
    expect((await trigger(flow, { order: 7 })).status).toBe(200);
    const { run, urls } = await pausedRun(flow.id);
    expect(run.pause).toEqual({ kind: "suspend", step_id: expect.stringMatching(/^c_/), until_ms: expect.any(Number) });
    expect(run.pause.until_ms - run.ended_at_ms).toBeGreaterThanOrEqual(24 * 3600 * 1000 - 1000);
    expect(run.steps.map((s: { status: string }) => s.status)).toEqual(["success", "skipped"]);
    expect(urls.resume_url).toMatch(new RegExp(`/flow/${run.id}/[A-Za-z0-9_-]{24}/resume$`));

    const resumed = await fetch(urls.resume_url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ approved: true, by: "ann" }),
    });
    expect(resumed.status).toBe(202);
    expect(await resumed.json()).toEqual({ status: "resumed", run_id: run.id });

    const continued = await runWith(flow.id, "success");
    expect(continued).toMatchObject({ resumed_from: run.id, pause: null });
    expect(continued.steps.map((s: { namespace: string }) => s.namespace)).toEqual(["after"]);
    const last = (await emits(flow.id)).at(-1);
    expect(last).toEqual({ resumed: { approved: true, by: "ann" }, ask: "paused here", order: 7, id: run.id, runs: 1 });
    // Gone once the run went on: both URLs say so.
    await eventually(async () => ((await fetch(urls.cancel_url)).status === 404 ? true : undefined), "the pause gone");
    expect((await fetch(urls.resume_url, { method: "POST" })).status).toBe(404);
  });

  it("cancels at the cancel URL: the rest never runs, and the run's record says why", async () => {
    const flow = await workflowOf({
      ask: pausing("$.flow.suspend()"),
      after: step(`$.send.emit({ raw_event: "ran" });`),
    });
    await trigger(flow, {});
    const { run, urls } = await pausedRun(flow.id);
    const cancelled = await fetch(urls.cancel_url);
    expect(cancelled.status).toBe(202);
    expect(await cancelled.json()).toEqual({ status: "cancelled", run_id: run.id });
    // The same request again is answered the same (a caller may retry); the other URL is refused.
    const again = await fetch(urls.cancel_url, { method: "POST" });
    expect([202, 404]).toContain(again.status);
    const record = await runWith(flow.id, "cancelled");
    expect(record).toMatchObject({ resumed_from: run.id, cancel_reason: "cancel_url", steps: [] });
    expect((await emits(flow.id)).filter((emit) => emit === ("ran" as unknown))).toEqual([]);
    expect((await fetch(urls.resume_url)).status).toBe(404);
  });

  it("cancels a suspension whose timeout passes, and refuses a resume that comes after", async () => {
    const flow = await workflowOf({
      ask: pausing("$.flow.suspend(800)"),
      after: step(`$.send.emit({ raw_event: "ran" });`),
    });
    await trigger(flow, {});
    const { run, urls } = await pausedRun(flow.id);
    const record = await runWith(flow.id, "cancelled");
    expect(record).toMatchObject({ resumed_from: run.id, cancel_reason: "timeout" });
    expect(await errors(flow.id)).toEqual([]);
    await eventually(async () => ((await fetch(urls.resume_url)).status === 404 ? true : undefined), "the pause gone");
    expect((await runs(flow.id)).map((r: { status: string }) => r.status)).toEqual(["cancelled", "paused"]);
  });

  it("goes on by itself after a delay, and sooner when its resume URL is requested", async () => {
    const flow = await workflowOf({
      wait: pausing("$.flow.delay(1200)"),
      after: step(`$.send.emit({ raw_event: { after: true, data: steps.wait.$resume_data ?? null } });`),
    });
    await trigger(flow, {});
    const { run } = await pausedRun(flow.id);
    const continued = await runWith(flow.id, "success");
    expect(continued.resumed_from).toBe(run.id);
    expect(continued.started_at_ms - run.ended_at_ms).toBeGreaterThanOrEqual(1000);
    expect((await emits(flow.id)).at(-1)).toEqual({ after: true, data: null });

    const early = await workflowOf({
      wait: pausing("$.flow.delay(60 * 60 * 1000)"),
      after: step(`$.send.emit({ raw_event: { data: steps.wait.$resume_data } });`),
    });
    await trigger(early, {});
    const paused = await pausedRun(early.id);
    expect((await fetch(`${paused.urls.resume_url}?reason=early`)).status).toBe(202);
    await runWith(early.id, "success");
    expect((await emits(early.id)).at(-1)).toEqual({ data: { reason: "early" } });
  });

  it("reruns a step that polls a job until it is done, counting its runs and keeping its context", async () => {
    const flow = await workflowOf({
      start: step(`return { queued: true };`),
      poll: step(`
        const { run } = $.context;
        if (run.runs === 1) {
          const job = await (await fetch(${JSON.stringify(jobs.url)} + "/jobs", { method: "POST", body: "{}" })).json();
          $.flow.rerun(300, { jobId: job.id }, 10);
          return;
        }
        const status = await (await fetch(${JSON.stringify(jobs.url)} + "/jobs/" + run.context.jobId)).json();
        if (status.status !== "done") return void $.flow.rerun(300, run.context, 10);
        $.export("$summary", "job done after " + run.runs + " runs");
        return { jobId: run.context.jobId, polls: status.polls };`),
      report: step(
        `$.send.emit({ raw_event: { result: steps.poll.$return_value, start: steps.start.$return_value } });`,
      ),
    });
    await trigger(flow, {});
    const done = await runWith(flow.id, "success");
    expect(done.steps.map((s: { namespace: string; summary: string | null }) => [s.namespace, s.summary])).toEqual([
      ["poll", "job done after 4 runs"],
      ["report", null],
    ]);
    expect((await emits(flow.id)).at(-1)).toEqual({ result: { jobId: "job-1", polls: 3 }, start: { queued: true } });
    // The chain: the first run and two reruns paused, each continuation naming the run before it.
    const all = (await runs(flow.id)).reverse();
    expect(all.map((r: { status: string }) => r.status)).toEqual(["paused", "paused", "paused", "success"]);
    for (const [index, record] of all.entries()) {
      expect(record.resumed_from).toBe(index === 0 ? null : all[index - 1].id);
    }
  });

  it("counts each rerun step's runs on its own: a step after a rerun step starts at 1, with no context", async () => {
    const rerunning = (name: string, max: number) =>
      step(`$.send.emit({ raw_event: { step: "${name}", runs: $.context.run.runs, context: $.context.run.context ?? null } });
        $.flow.rerun(0, { from: "${name}" }, ${max});`);
    const flow = await workflowOf({
      a: rerunning("a", 2),
      b: rerunning("b", 1),
      done: step(`$.send.emit({ raw_event: "done" });`),
    });
    await trigger(flow, {});
    await eventually(async () => ((await emits(flow.id)).includes("done" as never) ? true : undefined), "the end", {
      timeoutMs: 20_000,
    });
    expect(await emits(flow.id)).toEqual([
      { step: "a", runs: 1, context: null },
      { step: "a", runs: 2, context: { from: "a" } },
      { step: "a", runs: 3, context: { from: "a" } },
      { step: "b", runs: 1, context: null },
      { step: "b", runs: 2, context: { from: "b" } },
      "done",
    ]);
  });

  it("keeps paused runs resumable across a PUT of the triggers or of the same steps", async () => {
    const steps = { ask: pausing("$.flow.suspend()"), after: step(`$.send.emit({ raw_event: "after ran" });`) };
    const flow = await workflowOf(steps);
    await trigger(flow, {});
    const { urls } = await pausedRun(flow.id);
    const triggers = await api("PUT", `/workflows/${flow.id}`, {
      triggers: [
        { type: "http", props: {} },
        { type: "timer", props: { intervalSeconds: 86_400 } },
      ],
    });
    expect(triggers.status, JSON.stringify(triggers.json)).toBe(200);
    const same = await api("PUT", `/workflows/${flow.id}`, {
      steps: Object.entries(steps).map(([namespace, code]) => ({ namespace, component_code: code })),
    });
    expect(same.status, JSON.stringify(same.json)).toBe(200);
    expect((await fetch(urls.resume_url, { method: "POST" })).status).toBe(202);
    await runWith(flow.id, "success");
    expect((await emits(flow.id)).at(-1)).toBe("after ran");
  });

  it("reruns a step when a service calls its resume URL back, with the callback in $.context.run.callback_request", async () => {
    const flow = await workflowOf({
      transcribe: step(`
        const { run } = $.context;
        if (run.runs === 1) {
          const { resume_url } = $.flow.rerun(60 * 60 * 1000, null, 1);
          await fetch(${JSON.stringify(jobs.url)} + "/jobs", { method: "POST", body: JSON.stringify({ callback_url: resume_url }) });
          return;
        }
        if (!run.callback_request) throw new Error("the service never called back");
        return { transcript: run.callback_request.body.transcript, method: run.callback_request.method };`),
      report: step(`$.send.emit({ raw_event: steps.transcribe.$return_value });`),
    });
    await trigger(flow, {});
    await pausedRunWithoutEmit(flow.id);
    const callback = await eventually(
      () => [...jobs.jobs.values()].find((job) => job.callback)?.callback,
      "the callback URL",
    );
    const called = await fetch(callback, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ transcript: "hello there" }),
    });
    expect(called.status).toBe(202);
    await runWith(flow.id, "success");
    expect((await emits(flow.id)).at(-1)).toEqual({ transcript: "hello there", method: "POST" });
  });

  it("runs a registry-shaped action that hands its resume URL to a service as a webhook and returns the callback's body", async () => {
    // Written the way the registry's "start a job, wait for its webhook" actions are (a plain
    // object export, props with defaults, a method, `$summary`), against the stand-in job service.
    const action = `export default {
      key: "jobs-start-and-wait",
      name: "Start Job and Wait",
      version: "0.0.1",
      type: "action",
      props: {
        waitForCompletion: { type: "boolean", label: "Wait for completion", default: true },
        label: { type: "string", label: "Label", optional: true, default: "report" },
      },
      methods: {
        async startJob(callbackUrl) {
          const response = await fetch(${JSON.stringify(jobs.url)} + "/jobs", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ label: this.label, callback_url: callbackUrl }),
          });
          return response.json();
        },
      },
      async run({ $ }) {
        let response;
        const context = $.context;
        const run = context ? context.run : { runs: 1 };
        if (run.runs === 1) {
          let callbackUrl;
          if (context && this.waitForCompletion) {
            ({ resume_url: callbackUrl } = $.flow.rerun(600000, null, 1));
          }
          response = await this.startJob(callbackUrl);
        }
        if (run.callback_request) {
          response = run.callback_request.body;
        }
        $.export("$summary", "Job " + (response?.id ?? "?") + " is " + response?.status);
        return response;
      },
    };`;
    const flow = await workflowOf({
      start: action,
      report: step(`$.send.emit({ raw_event: steps.start.$return_value });`),
    });
    await trigger(flow, {});
    const paused = await pausedRunWithoutEmit(flow.id);
    const [jobId, job] = [...jobs.jobs.entries()].at(-1) ?? [];
    expect(paused.steps[0]).toMatchObject({
      namespace: "start",
      summary: `Job ${jobId} is running`,
      status: "success",
    });
    const called = await fetch(job?.callback ?? "", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: jobId, status: "completed", output: [1, 2, 3] }),
    });
    expect(called.status).toBe(202);
    const done = await runWith(flow.id, "success");
    expect(done.steps.map((s: { summary: string | null }) => s.summary)).toEqual([`Job ${jobId} is completed`, null]);
    expect((await emits(flow.id)).at(-1)).toEqual({ id: jobId, status: "completed", output: [1, 2, 3] });
  });

  async function pausedRunWithoutEmit(flowId: string) {
    return eventually(
      async () => (await runs(flowId)).find((run: { status: string }) => run.status === "paused"),
      `a paused run of ${flowId}`,
    );
  }

  it("answers 404 to a wrong secret or an unknown run, 413 to a large body, and never runs them", async () => {
    const flow = await workflowOf({ ask: pausing("$.flow.suspend()"), after: step(`return 1;`) });
    await trigger(flow, {});
    const { urls } = await pausedRun(flow.id);
    const forged = urls.resume_url.replace(/\/[A-Za-z0-9_-]{24}\/resume$/, `/${"A".repeat(24)}/resume`);
    expect((await fetch(forged, { method: "POST" })).status).toBe(404);
    const otherRun = urls.resume_url.replace(/run_[a-z0-9]+/, "run_01m8fg2pzc0t9w0tx1sxr2");
    expect((await fetch(otherRun, { method: "POST" })).status).toBe(404);
    const large = await fetch(urls.resume_url, { method: "POST", body: "x".repeat(40 * 1024) });
    expect(large.status).toBe(413);
    const runsNow = await runs(flow.id);
    expect(runsNow.map((run: { status: string }) => run.status)).toEqual(["paused"]);
  });

  it("cannot pause a run whose trigger answers with a custom response: the step fails, saying why", async () => {
    const flow = await workflowOf(
      { ask: step(`$.flow.suspend(); await $.respond({ status: 200, body: "ok" });`) },
      true,
    );
    const answer = await trigger(flow, {});
    expect(answer.status).toBe(400);
    const [failed] = await errors(flow.id);
    expect(failed.event.error).toMatchObject({ code: "NotImplementedError" });
    expect(failed.event.error.message).toContain("custom_response");
  });

  it("refuses to go on when the workflow's steps changed while it was paused, and forgets pauses of a deleted workflow", async () => {
    const flow = await workflowOf({ ask: pausing("$.flow.suspend()"), after: step(`return 1;`) });
    await trigger(flow, {});
    const { run, urls } = await pausedRun(flow.id);
    const put = await api("PUT", `/workflows/${flow.id}`, {
      steps: [
        { namespace: "ask", component_code: pausing("$.flow.suspend()") },
        { namespace: "later", component_code: step(`return 2;`) },
      ],
    });
    expect(put.status, JSON.stringify(put.json)).toBe(200);
    expect((await fetch(urls.resume_url, { method: "POST" })).status).toBe(202);
    const failed = await runWith(flow.id, "error");
    expect(failed).toMatchObject({ resumed_from: run.id, error: { code: "ResumeError" } });
    const [error] = await errors(flow.id);
    expect(error.event.error.message).toContain("steps were changed while it was paused");

    const doomed = await workflowOf({ ask: pausing("$.flow.suspend()") });
    await trigger(doomed, {});
    const paused = await pausedRun(doomed.id);
    expect((await api("DELETE", `/workflows/${doomed.id}`)).status).toBeLessThan(300);
    expect((await fetch(paused.urls.resume_url, { method: "POST" })).status).toBe(404);
  });

  it("keeps paused runs across a SIGKILL: a delay due meanwhile goes on after the restart, a URL still resumes", async () => {
    const delayed = await workflowOf({
      wait: pausing("$.flow.delay(1500)"),
      after: step(`$.send.emit({ raw_event: "delayed ran" });`),
    });
    const suspended = await workflowOf({
      ask: pausing("$.flow.suspend()"),
      after: step(`$.send.emit({ raw_event: { resumed: steps.ask.$resume_data } });`),
    });
    await trigger(delayed, {});
    await trigger(suspended, {});
    await pausedRun(delayed.id);
    const { urls } = await pausedRun(suspended.id);
    expect((await sluice.stop("SIGKILL")).signal).toBe("SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, 1600));
    sluice = await startSluice({ dataDir: sluice.dataDir });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    await runWith(delayed.id, "success");
    expect((await emits(delayed.id)).at(-1)).toBe("delayed ran");
    // The URL names the port of the server that made it: the same path on the new one.
    const resumeUrl = `${sluice.baseUrl.replace(/\/v1$/, "")}${new URL(urls.resume_url).pathname}`;
    expect((await fetch(`${resumeUrl}?ok=1`)).status).toBe(202);
    await runWith(suspended.id, "success");
    expect((await emits(suspended.id)).at(-1)).toEqual({ resumed: { ok: "1" } });
  });
});
