import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * A workflow's HTTP trigger driven end to end (docs/design/workflows.md 1.6): real HTTP to
 * `npm start`, steps run in the real sandbox, runs read back from `GET /v1/workflows/{id}/runs`.
 */
const step = (body: string) => `export default defineComponent({ async run({ steps, $ }) { ${body} } })`;

const ECHO = step(`return steps.trigger.event.body;`);
const RESPOND = step(`
  await $.respond({ status: 201, headers: { "x-answer": steps.first.$return_value.n }, body: { got: steps.first.$return_value } });
  return "responded";`);
const AFTER = step(`$.export("$summary", "step 3 ran"); return 3;`);
const THROWS = step(`throw new Error("broken before responding");`);

describe("workflow HTTP triggers over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

  /** Creates an active workflow of `codes` (steps `first`, `second`, ...) with one HTTP trigger. */
  async function workflowOf(codes: string[], customResponse: boolean) {
    const names = ["first", "second", "third"];
    const created = await api("POST", "/workflows", {
      settings: { name: "triggers", auto_deploy: true },
      steps: codes.map((code, i) => ({ namespace: names[i], component_code: code })),
      triggers: [{ type: "http", props: { custom_response: customResponse } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    return { id: created.json.data.id as string, url: created.json.data.triggers[0].endpoint_url as string };
  }

  /** The workflow's runs once `count` of them have ended, newest first. */
  async function endedRuns(workflowId: string, count: number) {
    return eventually(async () => {
      const runs = (await api("GET", `/workflows/${workflowId}/runs`)).json.data;
      const ended = runs.filter((run: { status: string }) => run.status !== "running");
      return ended.length >= count ? ended : undefined;
    }, `${count} ended runs of ${workflowId}`);
  }

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("answers 200 {success: true} at once without a custom response, and records the run", async () => {
    const flow = await workflowOf([ECHO, AFTER], false);
    const answer = await fetch(flow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ order: 7 }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ success: true });
    const [run] = await endedRuns(flow.id, 1);
    expect(run).toMatchObject({
      workflow_id: flow.id,
      trigger: { type: "http", id: expect.stringMatching(/^hi_/) },
      status: "success",
      attempts: 1,
      error: null,
    });
    expect(run.event_preview).toMatchObject({ method: "POST", body: { order: 7 } });
    expect(run.steps.map((s: { namespace: string; status: string }) => [s.namespace, s.status])).toEqual([
      ["first", "success"],
      ["second", "success"],
    ]);
  });

  it("answers with $.respond of step 2 of 3, once step 3 ran too", async () => {
    const flow = await workflowOf([ECHO, RESPOND, AFTER], true);
    const answer = await fetch(`${flow.url}?q=1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: "42" }),
    });
    expect(answer.status).toBe(201);
    expect(answer.headers.get("x-answer")).toBe("42");
    expect(await answer.json()).toEqual({ got: { n: "42" } });
    // The answer came after the run ended: its record is there at once, step 3 included.
    const [run] = (await api("GET", `/workflows/${flow.id}/runs`)).json.data;
    expect(run.status).toBe("success");
    expect(run.steps.map((s: { status: string; summary: string | null }) => [s.status, s.summary])).toEqual([
      ["success", null],
      ["success", null],
      ["success", "step 3 ran"],
    ]);
  });

  it("answers 400 text/plain when no step responds, and 400 when a step throws before responding", async () => {
    const silent = await workflowOf([ECHO, AFTER], true);
    const none = await fetch(silent.url, { method: "POST", body: "{}" });
    expect(none.status).toBe(400);
    expect(none.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await none.text()).toBe("No $.respond called in workflow");
    expect((await endedRuns(silent.id, 1))[0].status).toBe("success");

    const failing = await workflowOf([THROWS, RESPOND], true);
    const failed = await fetch(failing.url, { method: "POST", body: "{}" });
    expect(failed.status).toBe(400);
    expect(((await failed.json()) as { error: string }).error).toMatch(/failed before responding/);
    const [run] = await endedRuns(failing.id, 1);
    expect(run).toMatchObject({
      status: "error",
      error: { code: "Error", message: expect.stringContaining("broken") },
    });
    expect(run.steps.map((s: { status: string }) => s.status)).toEqual(["error", "skipped"]);
    const errors = (await api("GET", `/workflows/${failing.id}/$errors/event_summaries?expand=event`)).json.data;
    expect(errors).toHaveLength(1);
  });

  it("answers 404 while inactive and runs again once active", async () => {
    const flow = await workflowOf([ECHO], false);
    expect((await api("PUT", `/workflows/${flow.id}`, { active: false })).status).toBe(200);
    const off = await fetch(flow.url, { method: "POST", body: "{}" });
    expect(off.status).toBe(404);
    await off.arrayBuffer();
    expect((await api("PUT", `/workflows/${flow.id}`, { active: true })).status).toBe(200);
    const on = await fetch(flow.url, { method: "POST", body: "{}" });
    expect(on.status).toBe(200);
    await on.arrayBuffer();
    expect(await endedRuns(flow.id, 1)).toHaveLength(1);
  });

  it("answers OPTIONS as CORS and 413 over 512 KB, with no run", async () => {
    const flow = await workflowOf([ECHO], false);
    const preflight = await fetch(flow.url, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBeLessThan(300);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    await preflight.arrayBuffer();
    const big = await fetch(flow.url, { method: "POST", body: "x".repeat(512 * 1024 + 1) });
    expect(big.status).toBe(413);
    await big.arrayBuffer();
    // An answered request afterwards shows that nothing queued before it ran.
    const ok = await fetch(flow.url, { method: "POST", body: "{}" });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    const runs = await endedRuns(flow.id, 1);
    expect(runs).toHaveLength(1);
    expect(runs[0].event_preview.method).toBe("POST");
  });

  it("answers $.respond with the headers a source's respond gets: the code's own, CORS only when the code sets it", async () => {
    // One spec answered by a source's `respond` and by a workflow's `$.respond`, with and without
    // a CORS header of the code's own.
    const respond = (call: string) =>
      `${call}({ status: 202, headers: event.body.cors ? { "access-control-allow-origin": "https://app.example", "x-kind": "own" } : { "x-kind": "own" }, body: { ok: true } })`;
    const source = await api("POST", "/sources", {
      component_code: `export default {
        name: "Answering", version: "0.1.0",
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run(event) { ${respond("this.http.respond")}; },
      };`,
    });
    expect(source.status, JSON.stringify(source.json)).toBe(200);
    const flow = await workflowOf([step(`const event = steps.trigger.event; await ${respond("$.respond")};`)], true);

    /** The answer's headers but those the HTTP server writes itself (date, connection, framing). */
    const answerOf = async (url: string, cors: boolean) => {
      const answer = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cors }),
      });
      expect(answer.status).toBe(202);
      expect(await answer.json()).toEqual({ ok: true });
      const server = new Set(["date", "connection", "keep-alive", "content-length", "transfer-encoding"]);
      return Object.fromEntries([...answer.headers].filter(([name]) => !server.has(name)));
    };
    for (const cors of [false, true]) {
      const fromSource = await answerOf(source.json.data.configured_props.http.endpoint_url, cors);
      const fromWorkflow = await answerOf(flow.url, cors);
      expect(fromWorkflow).toEqual(fromSource);
      expect(fromWorkflow["x-kind"]).toBe("own");
      expect(fromWorkflow["access-control-allow-origin"]).toBe(cors ? "https://app.example" : undefined);
    }
  });

  it("sends each cookie of a respond as a Set-Cookie header of its own, from a source and from a workflow", async () => {
    const session = "session=s1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly";
    const respond = (call: string) =>
      `${call}({ status: 200, headers: { "Set-Cookie": [${JSON.stringify(session)}, "theme=dark"], "x-list": ["a", "b"] }, body: "ok" })`;
    const source = await api("POST", "/sources", {
      component_code: `export default {
        name: "Cookies", version: "0.1.0",
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run() { ${respond("this.http.respond")}; },
      };`,
    });
    expect(source.status, JSON.stringify(source.json)).toBe(200);
    const flow = await workflowOf([step(`await ${respond("$.respond")};`)], true);
    for (const url of [source.json.data.configured_props.http.endpoint_url, flow.url]) {
      const answer = await fetch(url, { method: "POST", body: "{}" });
      expect(answer.status).toBe(200);
      expect(await answer.text()).toBe("ok");
      // Joined with ", " they would read as one cookie whose Expires swallowed the second.
      expect(answer.headers.getSetCookie()).toEqual([session, "theme=dark"]);
      expect(answer.headers.get("x-list")).toBe("a, b");
    }
  });

  it("answers a respond whose body is a Readable, read in the sandbox, from a source and from a workflow", async () => {
    const respond = (call: string) =>
      `await ${call}({ status: 200, headers: { "content-type": "text/csv" }, body: Readable.from(["id,total\\n", Buffer.from("7,12.5\\n")]) })`;
    const source = await api("POST", "/sources", {
      component_code: `import { Readable } from "node:stream";
      export default {
        name: "Streams", version: "0.1.0",
        props: { http: { type: "$.interface.http", customResponse: true } },
        async run() { ${respond("this.http.respond")}; },
      };`,
    });
    expect(source.status, JSON.stringify(source.json)).toBe(200);
    const created = await api("POST", "/workflows", {
      settings: { name: "streams", auto_deploy: true },
      steps: [
        {
          namespace: "csv",
          component_code: `import { Readable } from "node:stream";
          export default defineComponent({ async run({ $ }) { ${respond("$.respond")}; } });`,
        },
      ],
      triggers: [{ type: "http", props: { custom_response: true } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    for (const url of [
      source.json.data.configured_props.http.endpoint_url,
      created.json.data.triggers[0].endpoint_url,
    ]) {
      const answer = await fetch(url, { method: "POST", body: "{}" });
      expect(answer.status).toBe(200);
      expect(answer.headers.get("content-type")).toBe("text/csv");
      expect(await answer.text()).toBe("id,total\n7,12.5\n");
    }
  });
});
