import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * A workflow's timer trigger against `npm start` (design step 7): the real `LocalTimers`, run
 * queue, sandbox and SQLite stores. A 1 s timer runs the workflow until it is deactivated, again
 * once it is activated, again after a restart on the same data dir, and never after its deletion.
 * Each run emits its trigger event (listed by `event_summaries`) and `$.send.http`s it to a
 * receiver, which tells that nothing runs after the workflow and its run records are gone.
 */
const tickStep = (url: string) => `export default defineComponent({
  async run({ steps, $ }) {
    $.send.emit({ raw_event: steps.trigger.event });
    $.send.http({ url: ${JSON.stringify(url)}, data: { timestamp: steps.trigger.event.timestamp } });
  },
});`;

/** How long a stopped timer is watched for a run that should not come: two ticks. */
const QUIET_MS = 2_000;

interface RunView {
  id: string;
  status: string;
  trigger: { type: string; id: string };
  event_preview: { timestamp: number; interval_seconds: number };
}

describe("workflow timer triggers against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let receiver: WebhookReceiver;

  const connect = () => {
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  };
  const runsOf = async (workflowId: string) => {
    const answer = await api("GET", `/workflows/${workflowId}/runs?limit=100`);
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return { total: answer.json.page_info.total_count as number, runs: answer.json.data as RunView[] };
  };
  /** Waits until the workflow has at least `count` runs, none of them still running. */
  const runsReach = (workflowId: string, count: number) =>
    eventually(
      async () => {
        const { total, runs } = await runsOf(workflowId);
        return total >= count && runs.every((run) => run.status !== "running") ? total : undefined;
      },
      `${count} finished runs of ${workflowId}`,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  /** The run count once nothing runs any more, after a pause for a job that was already on its way. */
  const settledRuns = async (workflowId: string) => {
    await sleep(500);
    return eventually(
      async () => {
        const { total, runs } = await runsOf(workflowId);
        return runs.every((run) => run.status !== "running") ? total : undefined;
      },
      `the runs of ${workflowId} to end`,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    sluice = await startSluice();
    connect();
  });
  afterAll(async () => {
    await sluice?.stop();
    await receiver?.stop();
  });

  it("runs on its timer, stops and resumes with active, runs again after a restart, and stops at delete", async () => {
    const created = await api("POST", "/workflows", {
      settings: { name: "Ticks", auto_deploy: true },
      steps: [{ namespace: "tick", component_code: tickStep(receiver.url("/ticks")) }],
      triggers: [{ type: "timer", props: { intervalSeconds: 1 } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    const workflowId: string = created.json.data.id;
    const timer = created.json.data.triggers[0];
    expect(timer).toMatchObject({ id: expect.stringMatching(/^ti_/), interval_seconds: 1 });

    // Runs, one per tick, each its own run started by the timer with the tick's event.
    await runsReach(workflowId, 3);
    const { runs } = await runsOf(workflowId);
    expect(new Set(runs.map((run) => run.id)).size).toBe(runs.length);
    for (const run of runs) {
      expect(run).toMatchObject({ status: "success", trigger: { type: "timer", id: timer.id } });
      expect(run.event_preview.interval_seconds).toBe(1);
    }
    const stamps = runs.map((run) => run.event_preview.timestamp);
    expect(new Set(stamps).size).toBe(stamps.length);

    // Each run emitted its trigger event: the timer event of a workflow.
    const events = await api("GET", `/workflows/${workflowId}/event_summaries?expand=event`);
    expect(events.status).toBe(200);
    expect(events.json.data.length).toBeGreaterThanOrEqual(3);
    const raw = events.json.data[0].event.raw_event;
    expect(raw).toMatchObject({
      timestamp: expect.any(Number),
      interval_seconds: 1,
      timezone_configured: { timezone: "UTC", iso8601: { timestamp: expect.stringMatching(/\+00:00$/) } },
      timezone_utc: { timezone: "UTC", year: expect.any(Number), day_of_week: expect.any(String) },
    });
    expect(raw.cron).toBeUndefined();
    expect(stamps).toContain(raw.timestamp);

    // Inactive: no more runs.
    expect((await api("PUT", `/workflows/${workflowId}`, { active: false })).status).toBe(200);
    const stopped = await settledRuns(workflowId);
    await sleep(QUIET_MS);
    expect((await runsOf(workflowId)).total).toBe(stopped);

    // Active again: runs again.
    expect((await api("PUT", `/workflows/${workflowId}`, { active: true })).status).toBe(200);
    const resumed = await runsReach(workflowId, stopped + 2);

    // A restart on the same data dir schedules the timers of active workflows again.
    await sluice.stop();
    sluice = await startSluice({ dataDir: sluice.dataDir });
    connect();
    const before = await settledRuns(workflowId);
    expect(before).toBeGreaterThanOrEqual(resumed);
    await runsReach(workflowId, before + 2);

    // Deleted: its runs go with it, and nothing reaches the receiver any more.
    expect((await api("DELETE", `/workflows/${workflowId}`)).status).toBe(200);
    expect((await api("GET", `/workflows/${workflowId}/runs`)).status).toBe(404);
    await sleep(1_000); // a send already queued may still be attempted once
    const received = receiver.requests.length;
    await sleep(QUIET_MS);
    expect(receiver.requests.length).toBe(received);
    await eventually(() => when(received > 0), "the receiver to have had the sends of the runs");
  }, 150_000);
});
