import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * What an operator sees on local mode's output (docs/operations.md "Logs"): a line per request,
 * per run failure, per deploy, update and delete of a source and per dead letter, and nothing
 * secret in any of them: not the API key, a secret prop, a webhook's signing secret, an
 * endpoint's key, a query string or an event's body.
 */
const mark = (what: string) => `${what}-${randomBytes(9).toString("hex")}`;
const API_KEY = mark("api-key");
const TOKEN = mark("secret-prop");
const BODY = mark("event-body");
const QUERY = mark("query-value");

const COMPONENT = `
export default {
  name: "Logged",
  version: "0.0.1",
  props: { http: "$.interface.http", token: { type: "string", secret: true } },
  async run(event) {
    if (event.body && event.body.fail) throw new TypeError("refused with " + this.token + " inside");
    this.$emit({ note: event.body.note });
  },
};
`;

type Line = Record<string, unknown>;

/** The JSON lines of the output (the ready line and the other notices are plain text). */
function jsonLines(output: string): Line[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Line);
}

describe("the operator's log of local mode", () => {
  let sluice: SluiceProcess;
  let receiver: WebhookReceiver;
  const secrets: string[] = [API_KEY, TOKEN, BODY, QUERY];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    receiver.status = 500;
    sluice = await startSluice({
      env: {
        SLUICE_LOG_LEVEL: "info",
        SLUICE_LOG_FORMAT: "json",
        SLUICE_API_KEY: API_KEY,
        SLUICE_WEBHOOK_MAX_ATTEMPTS: "1",
        SLUICE_WEBHOOK_TIMEOUT_MS: "2000",
      },
    });
  });
  afterAll(async () => {
    await sluice?.stop();
    await receiver?.stop();
  });

  const lines = () => jsonLines(sluice.output());
  const waitForLine = (what: string, match: (line: Line) => boolean) =>
    eventually(() => lines().find(match), what, { timeoutMs: 15_000, intervalMs: 25 });

  it("logs requests, deploys, run failures, dead letters, updates and deletes, with nothing secret", async () => {
    const api = apiClient(sluice.baseUrl, API_KEY);

    // A request line: method, path without the query, status, duration, the id the answer carries.
    const me = await fetch(`${sluice.baseUrl}/users/me?probe=${QUERY}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(me.status).toBe(200);
    const requestId = me.headers.get("x-request-id");
    const meLine = await waitForLine("the request line of /users/me", (l) => l.request_id === requestId);
    expect(meLine).toEqual({
      level: "info",
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      message: "request",
      service: "sluice",
      method: "GET",
      path: "/v1/users/me",
      status: 200,
      duration_ms: expect.any(Number),
      request_id: requestId,
    });
    const refused = await fetch(`${sluice.baseUrl}/users/me`, { headers: { authorization: "Bearer nope" } });
    await waitForLine("the line of a refused request", (l) => l.request_id === refused.headers.get("x-request-id"));
    expect(lines().find((l) => l.request_id === refused.headers.get("x-request-id"))).toMatchObject({ status: 401 });

    // A live stream's line has its path without the query and the id its refusal carried.
    const stream = await fetch(`${sluice.baseUrl.replace(/\/v1$/, "")}/sources/dc_unknown1/sse?event_name=${QUERY}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(stream.status).toBe(404);
    const streamLine = await waitForLine(
      "the stream's request line",
      (l) => l.request_id === stream.headers.get("x-request-id"),
    );
    expect(streamLine).toMatchObject({ method: "GET", path: "/sources/dc_unknown1/sse", status: 404 });

    // A webhook that always fails, subscribed to a source with a secret prop.
    const hook = await api("POST", `/webhooks?url=${encodeURIComponent(receiver.url("/hook"))}`);
    expect(hook.status).toBe(200);
    const webhookId = hook.json.data.id as string;
    secrets.push(hook.json.data.signing_secret);
    const created = await api("POST", "/sources", { component_code: COMPONENT, configured_props: { token: TOKEN } });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const sourceId = created.json.data.id as string;
    const endpoint = created.json.data.configured_props.http.endpoint_url as string;
    secrets.push(new URL(endpoint).pathname.split("/")[2] as string);
    expect((await api("POST", `/subscriptions?emitter_id=${sourceId}&listener_id=${webhookId}`)).status).toBe(200);
    await waitForLine("the deploy", (l) => l.message === "source deployed" && l.source_id === sourceId);

    // An endpoint request names its source, never its key; its event ends as a dead letter.
    const sent = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ note: BODY }),
    });
    expect(sent.status).toBe(200);
    const endpointLine = await waitForLine(
      "the endpoint's request line",
      (l) => l.message === "request" && l.method === "POST" && l.source_id === sourceId,
    );
    expect(endpointLine).toMatchObject({ path: "/http/{key}", status: 200, request_id: expect.any(String) });
    const dead = await waitForLine("the dead letter", (l) => String(l.message).includes("dead letter"));
    expect(dead).toMatchObject({
      level: "warn",
      webhook_id: webhookId,
      source_id: sourceId,
      attempts: 1,
      error: "HTTP 500",
    });

    // A failing run: the source, the error's name, its message with the secret masked.
    const failing = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fail: true }),
    });
    expect(failing.status).toBe(200);
    const failure = await waitForLine("the run failure", (l) => l.message === "source run failed");
    expect(failure).toMatchObject({
      level: "warn",
      source_id: sourceId,
      invocation: "run",
      error: "TypeError",
      error_message: "refused with [secret] inside",
    });

    expect((await api("PUT", `/sources/${sourceId}`, { name: "renamed" })).status).toBe(200);
    await waitForLine("the update", (l) => l.message === "source updated" && l.source_id === sourceId);
    expect((await api("DELETE", `/sources/${sourceId}`)).status).toBe(200);
    await waitForLine("the delete", (l) => l.message === "source deleted" && l.source_id === sourceId);
    await waitForLine("the delete's request line", (l) => l.method === "DELETE" && l.status === 200);

    // A paused run's URL: its request lines (a near miss's too) never show its secret.
    const flowId = (
      await api("POST", "/workflows", {
        settings: { name: "pauses", auto_deploy: true },
        steps: [
          {
            namespace: "ask",
            component_code: `export default defineComponent({ async run({ $ }) { $.send.emit({ raw_event: $.flow.suspend() }); } })`,
          },
        ],
        triggers: [{ type: "http", props: {} }],
      })
    ).json.data;
    expect((await fetch(flowId.triggers[0].endpoint_url, { method: "POST" })).status).toBe(200);
    const urls = await eventually(async () => {
      const emitted = (await api("GET", `/workflows/${flowId.id}/event_summaries?expand=event`)).json.data;
      return emitted[0]?.event.raw_event as { resume_url: string } | undefined;
    }, "the pause's URLs");
    const secret = new URL(urls.resume_url).pathname.split("/")[3] as string;
    secrets.push(secret);
    expect((await fetch(`${urls.resume_url}/extra`, { method: "POST" })).status).toBe(404);
    expect((await fetch(urls.resume_url.replace("/flow/", "/FLOW/"), { method: "POST" })).status).toBe(404);
    for (const prefix of ["/api/flow/", "//flow/", "/%66low/", "/flow;x/"]) {
      expect((await fetch(urls.resume_url.replace("/flow/", prefix), { method: "HEAD" })).status).toBe(404);
    }
    expect((await fetch(urls.resume_url, { method: "POST" })).status).toBe(202);
    const flowLine = await waitForLine("the resume's request line", (l) => l.message === "request" && l.status === 202);
    expect(flowLine).toMatchObject({ path: "/flow/{run_id}/{secret}/{action}", method: "POST" });
    await waitForLine("the dispatch", (l) => l.message === "paused workflow run dispatched" && l.how === "resume");

    const output = sluice.output();
    for (const secret of secrets) expect(output, "a secret was logged").not.toContain(secret);
    // Every line on stderr is one JSON object (a log shipper reads them one by one).
    const text = output.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("{"));
    expect(text.every((line) => /^(Sluice is ready at |Created your API key)/.test(line))).toBe(true);
  });
});

describe("the text format", () => {
  it("writes one readable line per request", async () => {
    const sluice = await startSluice({ env: { SLUICE_LOG_LEVEL: "info", SLUICE_LOG_FORMAT: "text" } });
    try {
      const answer = await fetch(`${sluice.baseUrl}/openapi.json`);
      expect(answer.status).toBe(200);
      const id = answer.headers.get("x-request-id");
      const line = await eventually(
        () =>
          sluice
            .output()
            .split("\n")
            .find((l) => l.includes(`request_id=${id}`)),
        "the request line",
      );
      expect(line).toMatch(
        new RegExp(
          `^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z INFO {2}request method=GET path=/v1/openapi.json status=200 duration_ms=[\\d.]+ request_id=${id}$`,
        ),
      );
    } finally {
      await sluice.stop();
    }
  });
});
