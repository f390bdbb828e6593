import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { postUids } from "../support/uid-load.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

const ENV = {
  SLUICE_WEBHOOK_BASE_DELAY_MS: "50",
  SLUICE_WEBHOOK_MAX_DELAY_MS: "200",
  SLUICE_WEBHOOK_TIMEOUT_MS: "2000",
};

/**
 * Design step 13: local mode killed with SIGKILL during a burst of requests to a workflow's HTTP
 * trigger (no custom response), whose last step `$.send.http`s a receiver; restarted on the same
 * data dir. Every request answered 2xx has its run, ended as a success, and reached the receiver;
 * a request arrives more than once only from its one run (docs/durability.md: a run cut short runs
 * again under the same run id, and its sends are queued under the same delivery ids).
 */
describe("SIGKILL during a burst of workflow runs", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let box: WebhookReceiver;
  let workflowId: string;
  let endpoint: string;

  beforeAll(async () => {
    box = await WebhookReceiver.start();
    sluice = await startSluice({ env: ENV });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const created = await api("POST", "/workflows", {
      settings: { name: "burst", auto_deploy: true },
      steps: [
        {
          namespace: "read",
          component_code: `export default defineComponent({ async run({ steps }) { return steps.trigger.event.body.uid; } })`,
        },
        {
          namespace: "forward",
          component_code: `export default defineComponent({ async run({ steps, $ }) {
            $.send.http({ url: ${JSON.stringify(box.url("/runs"))}, data: { uid: steps.read.$return_value, run: $.context.id } });
          } })`,
        },
      ],
      triggers: [{ type: "http", props: { custom_response: false } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    workflowId = created.json.data.id;
    endpoint = created.json.data.triggers[0].endpoint_url;
  });

  afterAll(async () => {
    await sluice?.stop();
    await box?.stop();
  });

  /** Every run of the workflow: its id, status and the uid of the request that started it. */
  async function runs(): Promise<{ id: string; status: string; uid: string }[]> {
    const found: { id: string; status: string; uid: string }[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await api("GET", `/workflows/${workflowId}/runs?limit=100${cursor ? `&after=${cursor}` : ""}`);
      expect(page.status).toBe(200);
      for (const run of page.json.data) found.push({ id: run.id, status: run.status, uid: run.event_preview.body.uid });
      if (page.json.data.length < 100) return found;
      cursor = page.json.page_info.end_cursor;
    }
  }

  it("keeps every run answered 2xx, and delivers its send, across a kill", async () => {
    const load = postUids(endpoint, 20);
    await eventually(() => when(load.accepted.length >= 150), "150 accepted requests", { timeoutMs: 30_000 });
    const ended = await sluice.stop("SIGKILL");
    expect(ended.signal).toBe("SIGKILL");
    await load.stop();
    sluice = await startSluice({ dataDir: sluice.dataDir, env: ENV });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const accepted = [...load.accepted];

    // Every accepted request has its run, ended as a success. A run the kill cut short is taken over
    // at start (its lease, 45 s with the default time limit, belonged to the dead process).
    const recorded = await eventually(
      async () => {
        const all = await runs();
        const done = new Set(all.filter((run) => run.status === "success").map((run) => run.uid));
        return accepted.every((uid) => done.has(uid)) ? all : undefined;
      },
      "a successful run for every accepted request",
      { timeoutMs: 20_000, intervalMs: 100 },
    ).catch(async (error) => {
      const all = await runs();
      const lost = accepted.filter((uid) => !all.some((run) => run.uid === uid && run.status === "success"));
      throw new Error(`${lost.length} of ${accepted.length} accepted requests have no successful run: ${error}`);
    });
    // One run per request: a request's job run again keeps its run id.
    const runOf = new Map<string, string>();
    for (const run of recorded) {
      expect(runOf.get(run.uid) ?? run.id, `two runs for request ${run.uid}`).toBe(run.id);
      runOf.set(run.uid, run.id);
    }

    // Every accepted request reached the receiver, and every arrival came from that request's run.
    await eventually(
      () => {
        const got = new Set(box.delivered.map((request) => JSON.parse(request.body).uid));
        return when(accepted.every((uid) => got.has(uid)));
      },
      "every accepted request at the receiver",
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    for (const request of box.delivered) {
      const { uid, run } = JSON.parse(request.body);
      expect(run, `the send of ${uid} came from its run`).toBe(runOf.get(uid));
    }
  }, 90_000);

  it("ends as an error, not running for ever, a custom-response run the kill cut short", async () => {
    const created = await api("POST", "/workflows", {
      settings: { name: "slow answer", auto_deploy: true },
      steps: [
        {
          namespace: "wait",
          component_code: `export default defineComponent({ async run({ $ }) {
            await new Promise((resolve) => setTimeout(resolve, 20_000));
            await $.respond({ status: 200, body: "late" });
          } })`,
        },
      ],
      triggers: [{ type: "http", props: { custom_response: true } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const slowId = created.json.data.id;
    const waiting = fetch(created.json.data.triggers[0].endpoint_url, { method: "POST" }).then(
      () => "answered",
      () => "cut",
    );
    const running = await eventually(async () => {
      const [run] = (await api("GET", `/workflows/${slowId}/runs`)).json.data;
      return run?.status === "running" ? run : undefined;
    }, "the run begun");
    await sluice.stop("SIGKILL");
    expect(await waiting).toBe("cut");
    sluice = await startSluice({ dataDir: sluice.dataDir, env: ENV });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const [after] = (await api("GET", `/workflows/${slowId}/runs`)).json.data;
    expect(after).toMatchObject({
      id: running.id,
      status: "error",
      error: { code: "ServerStoppedError", cell_id: "" },
      ended_at_ms: expect.any(Number),
    });
  }, 60_000);
});
