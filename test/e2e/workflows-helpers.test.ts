import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Each `$` helper of a workflow step as a user sees it (docs/components.md "Workflow steps"):
 * steps run in the real sandbox of `npm start`, their effects read back through the API, a real
 * receiver and the data dir.
 */
const BUCKET = "sluice-e2e-bucket";

const step = (body: string, props = "{}") =>
  `export default defineComponent({ props: ${props}, async run({ steps, $ }) { ${body} } })`;

describe("workflow step helpers over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let box: WebhookReceiver;

  /** Creates an active workflow of `steps` ({namespace: code}) with one HTTP trigger (no custom response). */
  async function workflowOf(steps: Record<string, string>) {
    const created = await api("POST", "/workflows", {
      settings: { name: "helpers", auto_deploy: true },
      steps: Object.entries(steps).map(([namespace, code]) => ({ namespace, component_code: code })),
      triggers: [{ type: "http", props: { custom_response: false } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const data = created.json.data;
    return {
      id: data.id as string,
      url: data.triggers[0].endpoint_url as string,
      deploymentId: data.deployment_id as string,
      stepIds: data.steps.map((s: { id: string }) => s.id) as string[],
    };
  }

  /** POSTs `body` to the trigger and waits for the run it started to end; that run's record. */
  async function runOnce(flow: { id: string; url: string }, body: unknown) {
    const before = (await api("GET", `/workflows/${flow.id}/runs`)).json.page_info.total_count as number;
    const answer = await fetch(flow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    return eventually(async () => {
      const page = (await api("GET", `/workflows/${flow.id}/runs`)).json;
      const [newest] = page.data;
      return page.page_info.total_count > before && newest.status !== "running" ? newest : undefined;
    }, `a run of ${flow.id}`);
  }

  const events = async (flowId: string, channel = "") =>
    (await api("GET", `/workflows/${flowId}/${channel}event_summaries?expand=event`)).json.data;

  beforeAll(async () => {
    box = await WebhookReceiver.start();
    sluice = await startSluice({ env: { SLUICE_S3_BUCKETS: BUCKET } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
    await box?.stop();
  });

  it("passes the trigger, return values and exports on; records $summary; shows $.context; emits", async () => {
    const flow = await workflowOf({
      parse: step(`
        $.export("order", steps.trigger.event.body);
        $.export("$summary", "parsed order " + steps.trigger.event.body.id);
        return { total: steps.trigger.event.body.qty * 2 };`),
      report: step(`
        $.send.emit({ raw_event: { total: steps.parse.$return_value.total, order: steps.parse.order,
          method: steps.trigger.event.method, context: $.context } });`),
    });
    const run = await runOnce(flow, { id: "A1", qty: 4 });
    expect(run.status).toBe("success");
    expect(run.steps.map((s: { summary: string | null }) => s.summary)).toEqual(["parsed order A1", null]);

    const [emitted] = await events(flow.id);
    expect(emitted.event.raw_event).toMatchObject({ total: 8, order: { id: "A1", qty: 4 }, method: "POST" });
    const context = emitted.event.raw_event.context;
    expect(context).toMatchObject({
      id: run.id,
      workflow_id: flow.id,
      deployment_id: flow.deploymentId,
      source_type: "HTTP",
      verified: false,
      owner_id: expect.stringMatching(/^u_/),
      platform_version: "sluice",
      JIT: false,
      run: { runs: 1, retry_count: 0 },
    });
    expect(Date.parse(context.ts)).toBe(run.started_at_ms);
    expect(context.deadline).toBeGreaterThan(run.started_at_ms);
  });

  it("ends the run at $.flow.exit, with and without return: later steps do not run, the run is a success", async () => {
    const later = step(`$.send.emit({ raw_event: "later step ran" });`);
    for (const exit of [`return $.flow.exit("with return");`, `$.flow.exit("without return"); $.export("after", 1);`]) {
      const flow = await workflowOf({ first: step(exit), second: later });
      const run = await runOnce(flow, {});
      expect(run).toMatchObject({ status: "exited", error: null, exit_reason: expect.stringMatching(/return$/) });
      expect(run.steps.map((s: { status: string }) => s.status)).toEqual(["exited", "skipped"]);
      expect(await events(flow.id)).toEqual([]);
      expect(await events(flow.id, "$errors/")).toEqual([]);
    }
  });

  it("delivers $.send.http to the receiver with its method, params, auth and data", async () => {
    const flow = await workflowOf({
      send: step(`
        $.send.http({ method: "put", url: ${JSON.stringify(box.url("/orders"))}, params: { page: 2, q: "a b" },
          auth: { username: "ann", password: "s3cret" }, headers: { "x-kind": "order" },
          data: { id: steps.trigger.event.body.id } });`),
    });
    const run = await runOnce(flow, { id: "H1" });
    expect(run.status).toBe("success");
    const received = await eventually(() => box.requests.find((r) => r.path.startsWith("/orders")), "the send");
    expect(received.method).toBe("PUT");
    expect(new URL(received.path, "http://x").searchParams.get("page")).toBe("2");
    expect(new URL(received.path, "http://x").searchParams.get("q")).toBe("a b");
    expect(received.headers.authorization).toBe(`Basic ${Buffer.from("ann:s3cret").toString("base64")}`);
    expect(received.headers["x-kind"]).toBe("order");
    expect(received.headers["content-type"]).toMatch(/^application\/json/);
    expect(JSON.parse(received.body)).toEqual({ id: "H1" });
  });

  it("ends a workflow that $.send.https its own trigger after 5 hops (508), instead of looping", async () => {
    const flow = await workflowOf({
      again: step("$.send.http({ url: steps.trigger.event.body.self, data: steps.trigger.event.body });"),
    });
    const answer = await fetch(flow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ self: flow.url }),
    });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    const runs = async () => (await api("GET", `/workflows/${flow.id}/runs`)).json.page_info.total_count as number;
    // The request's run, then one per send carrying 1 to 5 hops; the send carrying 6 is refused.
    await eventually(async () => ((await runs()) >= 6 ? true : undefined), "six runs");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await runs()).toBe(6);
  });

  it("writes $.send.s3 under the data dir's s3/<bucket>/, and refuses a bucket not allowed", async () => {
    const flow = await workflowOf({
      store: step(`$.send.s3({ bucket: ${JSON.stringify(BUCKET)}, prefix: "orders/", payload: { id: "S1" } });`),
    });
    const run = await runOnce(flow, {});
    expect(run.status).toBe("success");
    const folder = join(sluice.dataDir, "s3", BUCKET, "orders");
    const file = await eventually(() => {
      try {
        // Written beside as `<name>.<random>.partial`, then renamed: only the renamed object counts.
        return readdirSync(folder).find((name) => name.startsWith(run.id) && !name.endsWith(".partial"));
      } catch {
        return undefined;
      }
    }, "the object");
    expect(file).toMatch(/\.json$/);
    expect(JSON.parse(readFileSync(join(folder, file), "utf8"))).toEqual({ id: "S1" });

    const refused = await workflowOf({
      store: step(`$.send.s3({ bucket: "not-listed", prefix: "x/", payload: 1 });`),
    });
    await runOnce(refused, {});
    const [error] = await events(refused.id, "$errors/");
    expect(error.event.error).toMatchObject({
      code: "SendRefusedError",
      message: expect.stringContaining("not-listed"),
    });
  });

  it("fails a run calling $.send.email with a clear error on $errors", async () => {
    const flow = await workflowOf({ mail: step(`$.send.email({ subject: "hi", text: "there" });`) });
    const run = await runOnce(flow, {});
    expect(run).toMatchObject({ status: "error", error: { code: "NotImplementedError", cell_id: flow.stepIds[0] } });
    const [error] = await events(flow.id, "$errors/");
    expect(error.event.error).toMatchObject({
      code: "NotImplementedError",
      message: "$.send.email is not available in Sluice yet",
    });
  });

  it("keeps a step's $.service.db across runs", async () => {
    const flow = await workflowOf({
      count: step(
        `const n = ((await this.db.get("n")) ?? 0) + 1; await this.db.set("n", n); $.send.emit({ raw_event: n });`,
        `{ db: "$.service.db" }`,
      ),
    });
    for (let i = 0; i < 3; i++) expect((await runOnce(flow, {})).status).toBe("success");
    const counted = (await events(flow.id)).map((e: { event: { raw_event: number } }) => e.event.raw_event);
    expect(counted.sort()).toEqual([1, 2, 3]);
  });

  it("stores a failing step's $errors event: original event and context, the step's c_ as cellId", async () => {
    const flow = await workflowOf({
      ok: step(`return 1;`),
      boom: step(`throw new RangeError("no such order: " + steps.trigger.event.body.id);`),
      never: step(`$.send.emit({ raw_event: "never" });`),
    });
    const run = await runOnce(flow, { id: "E1" });
    expect(run).toMatchObject({ status: "error", error: { code: "RangeError", cell_id: flow.stepIds[1] } });
    expect(run.steps.map((s: { status: string }) => s.status)).toEqual(["success", "error", "skipped"]);
    const [error] = await events(flow.id, "$errors/");
    expect(error.event.original_event).toMatchObject({ method: "POST", body: { id: "E1" } });
    expect(error.event.original_context).toMatchObject({ id: run.id, workflow_id: flow.id, source_type: "HTTP" });
    expect(error.event.error).toMatchObject({
      code: "RangeError",
      cellId: flow.stepIds[1],
      message: "no such order: E1",
      stack: expect.stringContaining("RangeError: no such order: E1"),
    });
    expect(Number.isNaN(Date.parse(error.event.error.ts))).toBe(false);
    expect(await events(flow.id)).toEqual([]);
  });
});
