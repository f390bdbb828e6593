import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, deployHttpSource } from "../support/api-client.ts";
import { eventually } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/** A source whose run sends its `http_request` prop's request and emits the answer (or the error). */
const EXECUTE_SOURCE = `
export default {
  name: "Forward",
  version: "0.0.1",
  props: {
    http: "$.interface.http",
    request: { type: "http_request", label: "Request", default: { method: "POST" } },
  },
  async run(event) {
    try {
      const { status, data } = await this.request.execute();
      this.$emit({ status, data });
    } catch (error) {
      this.$emit({ error: error.name, message: error.message });
    }
  },
};
`;

describe("run-time props against local mode with AWS's outbound rule (SLUICE_WEBHOOK_ALLOW_PRIVATE=false)", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    sluice = await startSluice({ env: { SLUICE_WEBHOOK_ALLOW_PRIVATE: "false" } });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
    await receiver?.stop();
  });

  it("refuses an http_request prop's execute() to a loopback address, reaching nothing", async () => {
    const source = await deployHttpSource(api, EXECUTE_SOURCE);
    const configured = await api("PUT", `/sources/${source.id}`, {
      configured_props: { request: { url: receiver.url("/internal") } },
    });
    expect(configured.status, JSON.stringify(configured.json)).toBe(200);
    expect(configured.json.data.configured_props.request).toEqual({ method: "POST", url: receiver.url("/internal") });
    expect((await fetch(source.endpoint, { method: "POST", body: "{}" })).status).toBe(200);
    const emitted = await eventually(async () => {
      const page = await api("GET", `/sources/${source.id}/event_summaries?expand=event`);
      return page.json.data[0]?.event;
    }, "the run's emit");
    expect(emitted).toEqual({
      error: "ForbiddenAddressError",
      message: expect.stringMatching(/^execute\(\): the request was refused: 127\.0\.0\.1 is a private address/),
    });
    expect(receiver.requests).toEqual([]);
  });
});

/**
 * A source that schedules what it is sent, as the registry's task scheduler does: each body item
 * `{id, in_ms, at}` is emitted on the `later` channel at `Date.now() + in_ms`, or at `at` as given.
 */
const SCHEDULER_SOURCE = `
export default {
  name: "Scheduler",
  version: "0.0.1",
  dedupe: "unique",
  props: { http: "$.interface.http" },
  async run(event) {
    for (const item of event.body.items) {
      const delivery_ts = "at" in item ? item.at : Date.now() + item.in_ms;
      this.$emit({ task: item.id }, { name: "later", id: item.id, delivery_ts });
    }
  },
};
`;

/**
 * The registry's task scheduler in its shape (`pipedream-new-scheduled-tasks`), its account-bound
 * self-subscription made by the test instead: `/schedule` emits the task to its `self` channel at
 * the given time under a fresh id, and a task coming back through the subscription is emitted
 * again, on the default channel, under the same id (`dedupe: "unique"`).
 */
const TASK_SCHEDULER_SOURCE = `
import { randomUUID } from "node:crypto";

export default {
  key: "fixture-new-scheduled-tasks",
  name: "New Scheduled Tasks",
  type: "source",
  version: "0.3.0",
  dedupe: "unique",
  props: {
    http: { type: "$.interface.http", customResponse: true },
  },
  methods: {
    selfChannel() {
      return "self";
    },
    emitScheduleEvent(event, timestamp) {
      const $id = randomUUID();
      this.$emit({ ...event, $channel: this.selfChannel(), $id }, {
        name: this.selfChannel(),
        id: $id,
        delivery_ts: Date.parse(timestamp),
      });
      return $id;
    },
    emitEvent(event) {
      const id = event.$id;
      delete event.$channel;
      delete event.$id;
      this.$emit(event, { summary: JSON.stringify(event), id, ts: +new Date() });
    },
  },
  async run(event) {
    if (event.path === "/schedule") {
      const id = this.emitScheduleEvent(event.body, event.body.timestamp);
      this.http.respond({ status: 200, body: { msg: "Successfully scheduled task", id } });
    } else if (event.$channel === this.selfChannel()) {
      this.emitEvent(event);
    }
  },
};
`;

describe("delayed emits ($emit with delivery_ts) against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  const list = async (sourceId: string, channel: string) =>
    (
      await api(
        "GET",
        `/sources/${sourceId}/event_summaries?expand=event&limit=100&event_name=${encodeURIComponent(channel)}`,
      )
    ).json as { page_info: { total_count: number }; data: { id: string; event: any; metadata: any }[] };
  const schedule = async (endpoint: string, items: unknown[]) =>
    expect(
      (
        await fetch(endpoint, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ items }),
        })
      ).status,
    ).toBe(200);

  it("keeps a delayed emit on $in, then emits it on its channel at its time", async () => {
    const source = await deployHttpSource(api, SCHEDULER_SOURCE);
    await schedule(source.endpoint, [{ id: "t1", in_ms: 2500 }]);
    const pending = await eventually(async () => (await list(source.id, "$in")).data[0], "the $in event");
    expect(pending.event).toEqual({ task: "t1" });
    expect(pending.metadata).toMatchObject({ id: "t1", name: "$in", delivery_ts: expect.any(Number) });
    expect((await list(source.id, "later")).data).toEqual([]);
    const delivered = await eventually(async () => (await list(source.id, "later")).data[0], "the delivery");
    expect(delivered.event).toEqual({ task: "t1" });
    expect(delivered.metadata.id).toBe("t1");
    expect(delivered.metadata).not.toHaveProperty("delivery_ts");
    expect(Number(delivered.id.split("-")[0])).toBeGreaterThanOrEqual(pending.metadata.delivery_ts);
    await eventually(async () => ((await list(source.id, "$in")).data.length === 0 ? true : undefined), "$in empty");
  });

  it("emits at once a delivery_ts that is not a number or is past, and refuses one more than 30 days ahead", async () => {
    const source = await deployHttpSource(api, SCHEDULER_SOURCE);
    await schedule(source.endpoint, [
      { id: "text", at: "tomorrow" },
      { id: "past", at: 1 },
      { id: "far", at: Date.now() + 40 * 24 * 3600 * 1000 },
    ]);
    const now = await eventually(async () => {
      const page = await list(source.id, "later");
      return page.data.length === 2 ? page.data : undefined;
    }, "the two emitted at once");
    expect(now.map((e) => e.event.task).sort()).toEqual(["past", "text"]);
    const [error] = (await list(source.id, "$errors")).data;
    expect(error?.event.error).toMatchObject({
      code: "DelayedEmitError",
      message: "delayed emits were refused: 1 with a delivery_ts more than 30 days ahead; the others were scheduled",
    });
    expect((await list(source.id, "$in")).data).toEqual([]);
  });

  it("cancels a delayed emit whose $in event is deleted", async () => {
    const source = await deployHttpSource(api, SCHEDULER_SOURCE);
    await schedule(source.endpoint, [
      { id: "keep", in_ms: 2000 },
      { id: "drop", in_ms: 2000 },
    ]);
    const pending = await eventually(async () => {
      const page = await list(source.id, "$in");
      return page.data.length === 2 ? page.data : undefined;
    }, "both pending");
    const drop = pending.find((e) => e.metadata.id === "drop");
    const deleted = await api(
      "DELETE",
      `/sources/${source.id}/events?start_id=${drop?.id}&end_id=${drop?.id}&event_name=%24in`,
    );
    expect(deleted.status).toBe(202);
    const delivered = await eventually(async () => (await list(source.id, "later")).data[0], "the kept one");
    expect(delivered.event).toEqual({ task: "keep" });
    // The pass that delivered "keep" was past "drop"'s time too.
    expect((await list(source.id, "later")).data.map((e) => e.event.task)).toEqual(["keep"]);
  });

  it("bounds a flood of delayed emits at 1,000 waiting per source", async () => {
    const source = await deployHttpSource(api, SCHEDULER_SOURCE);
    const items = (from: number) => Array.from({ length: 600 }, (_, i) => ({ id: `f${from + i}`, in_ms: 3_600_000 }));
    await schedule(source.endpoint, items(0));
    await eventually(
      async () => ((await list(source.id, "$in")).page_info.total_count === 600 ? true : undefined),
      "600",
    );
    await schedule(source.endpoint, items(600));
    const error = await eventually(async () => (await list(source.id, "$errors")).data[0], "the refusal");
    expect(error.event.error.message).toBe(
      "delayed emits were refused: 200 past the 1000 delayed emits a source may have waiting; the others were scheduled",
    );
    expect((await list(source.id, "$in")).page_info.total_count).toBe(1000);
    // Deleting the source forgets them all.
    expect((await api("DELETE", `/sources/${source.id}`)).status).toBe(200);
  });

  it("runs the registry's task scheduler: a task comes back through its self-subscription and is emitted once", async () => {
    const source = await deployHttpSource(api, TASK_SCHEDULER_SOURCE);
    const subscribed = await api(
      "POST",
      `/subscriptions?emitter_id=${source.id}&listener_id=${source.id}&event_name=self`,
    );
    expect(subscribed.status, JSON.stringify(subscribed.json)).toBe(200);
    const answer = await fetch(`${source.endpoint}/schedule`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ timestamp: new Date(Date.now() + 2000).toISOString(), message: "wake up" }),
    });
    const { id } = (await answer.json()) as { id: string };
    expect(answer.status).toBe(200);
    const task = await eventually(async () => (await list(source.id, "")).data[0], "the task");
    expect(task.event).toEqual({ timestamp: expect.any(String), message: "wake up" });
    expect(task.metadata.id).toBe(id);
    expect((await list(source.id, "self")).data.map((e) => e.metadata.id)).toEqual([id]);
    expect((await list(source.id, "$errors")).data).toEqual([]);
  });

  it("delivers after a restart what came due while Sluice was stopped", async () => {
    const source = await deployHttpSource(api, SCHEDULER_SOURCE);
    await schedule(source.endpoint, [{ id: "across", in_ms: 1500 }]);
    await eventually(async () => (await list(source.id, "$in")).data[0], "pending");
    await sluice.stop();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    sluice = await startSluice({ dataDir: sluice.dataDir });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const delivered = await eventually(async () => (await list(source.id, "later")).data[0], "the late delivery");
    expect(delivered.event).toEqual({ task: "across" });
  });
});
