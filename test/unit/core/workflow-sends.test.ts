import { describe, expect, it } from "vitest";
import { LocalObjectSink } from "#adapters/local/local-object-sink";
import { openSqlite } from "#adapters/local/sqlite-database";
import { SqliteDeadLetterStore } from "#adapters/local/sqlite-dead-letter-store";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { formatId, idEpochMs } from "#core/ids";
import type { ObjectPutResult, ObjectSink } from "#core/ports/object-sink";
import type { WebhookSender, WebhookSendResult } from "#core/ports/webhook-sender";
import type { WorkflowStore } from "#core/ports/workflow-store";
import type { DeliveryRecord, HttpSendRequest } from "#core/subscription-model";
import { attemptDelivery, type DeliveryDeps, deliverySettings, sendRequest } from "#core/webhook-delivery";
import { type DeliveredSend, queueWorkflowSends, S3_PREFIX_MAX_CHARS, sendDeliveryId } from "#core/workflow-sends";

const NOW = Date.UTC(2026, 10, 20, 12);
const RUN = formatId("run", NOW - 5_000, new Uint8Array(12).fill(7));
const FLOW = { id: "p_flow", userId: "u_ada", workspaceId: "o_ada" };

/** An object sink that allows `buckets` and records what it is asked to store. */
function recordingSink(buckets: string[], answer: ObjectPutResult = { stored: true }) {
  const puts: { bucket: string; key: string; body: string; contentType: string }[] = [];
  // The local sink's rule for keys, as local mode checks them when a run ends.
  const local = new LocalObjectSink("/nowhere", buckets);
  const sink: ObjectSink = {
    allowsBucket: (bucket) => buckets.includes(bucket),
    keyProblem: (key) => local.keyProblem(key),
    async putObject(bucket, key, body, contentType) {
      puts.push({ bucket, key, body, contentType });
      return answer;
    },
  };
  return { sink, puts };
}

function queueDeps(buckets: string[] = ["orders"]) {
  const deliveries = new SqliteDeliveryQueue(openSqlite(":memory:"));
  return { deliveries, objects: recordingSink(buckets).sink };
}

const http = (overrides: Partial<HttpSendRequest> = {}): DeliveredSend => ({
  type: "http",
  method: "POST",
  url: "https://example.com/hook",
  ...overrides,
});
const s3 = (bucket = "orders", prefix = "in/"): DeliveredSend => ({ type: "s3", bucket, prefix, payload: { n: 1 } });

describe("queueWorkflowSends", () => {
  it("queues each send as a delivery of the workflow, with a deterministic id and the object key of its index", async () => {
    const deps = queueDeps();
    const refusals = await queueWorkflowSends(deps, FLOW, RUN, [http({ data: { a: 1 } }), s3()], NOW);
    expect(refusals).toEqual([]);
    expect(deps.deliveries.size()).toBe(2);
    const first = deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 0));
    const second = deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 1));
    expect(first?.target).toEqual({
      kind: "http",
      workflowId: "p_flow",
      request: { method: "POST", url: "https://example.com/hook", data: { a: 1 } },
    });
    expect(second?.target).toEqual({
      kind: "s3",
      workflowId: "p_flow",
      bucket: "orders",
      key: `in/${RUN}-1.json`,
      body: { n: 1 },
    });
    expect(first).toMatchObject({ emitterId: "p_flow", eventId: RUN, attempts: 0, nextAttemptAt: NOW });
  });

  it("counts a $.send.http as one hop more than what led to its run; an s3 send reaches no endpoint", async () => {
    const deps = queueDeps();
    await queueWorkflowSends(deps, FLOW, RUN, [http(), s3()], NOW, 2);
    expect(deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 0))?.hops).toBe(3);
    expect(deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 1))?.hops).toBeUndefined();
    await queueWorkflowSends(deps, FLOW, "run_other", [http()], NOW);
    expect(deps.deliveries.get(sendDeliveryId(FLOW.id, "run_other", 0))?.hops).toBe(1);
  });

  it("queues nothing new when the same run is applied again", async () => {
    const deps = queueDeps();
    await queueWorkflowSends(deps, FLOW, RUN, [http(), s3()], NOW);
    await queueWorkflowSends(deps, FLOW, RUN, [http(), s3()], NOW + 60_000);
    expect(deps.deliveries.size()).toBe(2);
    expect(deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 0))?.nextAttemptAt).toBe(NOW);
  });

  it("makes ids that differ by workflow, run and index, shaped like delivery ids and timed by the run", () => {
    const ids = new Set([
      sendDeliveryId("p_flow", RUN, 0),
      sendDeliveryId("p_flow", RUN, 1),
      sendDeliveryId("p_other", RUN, 0),
      sendDeliveryId("p_flow", formatId("run", NOW, new Uint8Array(12).fill(9)), 0),
    ]);
    expect(ids.size).toBe(4);
    for (const id of ids) expect(id).toMatch(/^dlv_[0-9a-z]{22}$/);
    expect(idEpochMs("delivery", sendDeliveryId("p_flow", RUN, 0))).toBe(NOW - 5_000);
    expect(sendDeliveryId("p_flow", RUN, 3)).toBe(sendDeliveryId("p_flow", RUN, 3));
  });

  it.each([
    ["a URL that is not one", http({ url: "not a url" }), /not a URL/],
    ["a file: URL", http({ url: "file:///etc/passwd" }), /http or https/],
    ["a javascript: URL", http({ url: "javascript:alert(1)" }), /http or https/],
    ["an https URL without a host", http({ url: "https://" }), /not a URL/],
    ["a data: URL", http({ url: "data:text/plain,hi" }), /http or https/],
    ["a method that is not a token", http({ method: "GET /admin HTTP/1.1\r\nX:" }), /method/],
    ["a bucket not allowed", s3("secret-bucket"), /not allowed on this server/],
    ["a prefix with a .. segment", s3("orders", "a/../../etc/"), /\.\. segment/],
    ["a prefix that is only ..", s3("orders", ".."), /\.\. segment/],
    ["a prefix over the limit", s3("orders", "p".repeat(S3_PREFIX_MAX_CHARS + 1)), /over 512/],
    // Keys the store can never take: refused now rather than retried for hours (locally: no file path).
    ["a prefix with an empty segment", s3("orders", "a//b/"), /empty, \. or \.\. segment/],
    ["an absolute prefix", s3("orders", "/abs/"), /absolute/],
    ["a prefix with a NUL", s3("orders", "a\0b/"), /NUL/],
    ["a prefix segment over a file name's length", s3("orders", `${"n".repeat(300)}/`), /over 255 bytes/],
    ["a method the runtime does not send", http({ method: "TRACE" }), /method/],
  ])("refuses %s, queues the others, and says why without quoting secrets", async (_what, refused, reason) => {
    const deps = queueDeps();
    const secrets = { headers: { authorization: "Bearer hunter2" }, auth: { username: "ada", password: "hunter2" } };
    // A refused http send carries the same secrets: they must not leak into the reason.
    const sends = [http(secrets), refused.type === "http" ? { ...refused, ...secrets } : refused];
    const refusals = await queueWorkflowSends(deps, FLOW, RUN, sends, NOW);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]?.index).toBe(1);
    expect(refusals[0]?.reason).toMatch(reason);
    expect(refusals[0]?.reason).not.toContain("hunter2");
    expect(deps.deliveries.size()).toBe(1);
    expect(deps.deliveries.get(sendDeliveryId(FLOW.id, RUN, 0))).toBeDefined();
  });

  it("refuses every bucket when none is allowed on this server", async () => {
    const deps = queueDeps([]);
    const refusals = await queueWorkflowSends(deps, FLOW, RUN, [s3("orders")], NOW);
    expect(refusals.map((refusal) => refusal.reason)).toEqual([
      '$.send.s3: the bucket "orders" is not allowed on this server',
    ]);
    expect(deps.deliveries.size()).toBe(0);
  });
});

describe("sendRequest: a $.send.http on the wire", () => {
  it("appends params to the query the URL already has", () => {
    const built = sendRequest({
      method: "GET",
      url: "https://example.com/search?q=1",
      params: { page: "2", q: "a b&c" },
    });
    expect(built).toMatchObject({ method: "GET", url: "https://example.com/search?q=1&page=2&q=a+b%26c", body: "" });
  });

  it("sends auth as Basic, over an Authorization header the user set", () => {
    const built = sendRequest({
      method: "POST",
      url: "https://example.com/",
      headers: { Authorization: "Bearer old" },
      auth: { username: "ada", password: "pä:ss" },
    });
    expect("headers" in built && built.headers).toEqual({
      authorization: `Basic ${Buffer.from("ada:pä:ss").toString("base64")}`,
      "x-sluice-hops": "1",
    });
  });

  it("sends data as JSON with its content type, unless the user named one", () => {
    const json = sendRequest({ method: "POST", url: "https://example.com/", data: { a: [1, "é"] } });
    expect(json).toMatchObject({ body: '{"a":[1,"é"]}', headers: { "content-type": "application/json" } });
    const own = sendRequest({
      method: "PUT",
      url: "https://example.com/",
      headers: { "Content-Type": "application/vnd.api+json" },
      data: { a: 1 },
    });
    expect(own).toMatchObject({ body: '{"a":1}', headers: { "Content-Type": "application/vnd.api+json" } });
    expect("headers" in own && Object.keys(own.headers)).toEqual(["Content-Type", "x-sluice-hops"]);
    const text = sendRequest({ method: "POST", url: "https://example.com/", data: "a=1&b=2" });
    expect(text).toMatchObject({ body: "a=1&b=2", headers: { "content-type": "text/plain; charset=utf-8" } });
  });

  it("keeps the user's headers but framing, hop-by-hop, Host and values HTTP cannot carry", () => {
    const built = sendRequest({
      method: "POST",
      url: "https://example.com/",
      headers: {
        "X-Api-Key": "k1",
        Accept: "text/csv",
        "Content-Length": "999",
        "Transfer-Encoding": "chunked",
        Connection: "close",
        Host: "internal.example",
        "Proxy-Authorization": "x",
        "X-Split": "a\r\nInjected: yes",
        "Bad Name": "v",
      },
    });
    expect("headers" in built && built.headers).toEqual({
      "X-Api-Key": "k1",
      Accept: "text/csv",
      "x-sluice-hops": "1",
    });
  });

  it("carries none of Sluice's signing or delivery headers, only the hop count", () => {
    const built = sendRequest({ method: "POST", url: "https://example.com/", data: {} });
    const names = "headers" in built ? Object.keys(built.headers).filter((name) => name !== "x-sluice-hops") : [];
    expect(names.join(",")).not.toMatch(/sluice|webhook-|signature/i);
  });

  it("sends Sluice's hop count, which a step cannot set itself, so a workflow that calls its own trigger ends in 508", () => {
    const built = sendRequest(
      { method: "POST", url: "https://example.com/", headers: { "X-Sluice-Hops": "0", "x-sluice-hops": "0" } },
      3,
    );
    expect("headers" in built && built.headers).toEqual({ "x-sluice-hops": "3" });
  });
});

/** A sender that answers from a list and records each request. */
function scriptedSender(answers: WebhookSendResult[]) {
  const sent: { url: string; headers: Record<string, string>; body: string; method: string | undefined }[] = [];
  const sender: WebhookSender = {
    async post(url, headers, body, _timeoutMs, method) {
      sent.push({ url, headers: { ...headers }, body, method });
      return answers.shift() ?? { status: 200 };
    },
  };
  return { sender, sent };
}

function sendDeps(objects: ObjectSink, workflows: Record<string, string> = { p_flow: "u_ada" }) {
  const deadLetters = new SqliteDeadLetterStore(openSqlite(":memory:"));
  const deps: DeliveryDeps = {
    subscriptions: {} as DeliveryDeps["subscriptions"],
    secrets: {} as DeliveryDeps["secrets"],
    workflows: {
      getWorkflow: async (id: string) => (workflows[id] ? { id, userId: workflows[id] } : undefined),
    } as unknown as WorkflowStore,
    objects,
    deadLetters,
    clock: { nowMs: () => NOW + 100 },
  };
  return { deps, deadLetters };
}

function sendDelivery(target: DeliveryRecord["target"], attempts = 0): DeliveryRecord {
  return {
    id: sendDeliveryId("p_flow", RUN, 0),
    target,
    subscriptionIds: [],
    emitterId: "p_flow",
    eventId: RUN,
    channel: "",
    payload: null,
    attempts,
    nextAttemptAt: NOW,
    createdAt: NOW,
  };
}

describe("attemptDelivery of a workflow's sends", () => {
  const settings = deliverySettings({ maxAttempts: 3, random: () => 0.5 });
  const httpTarget: DeliveryRecord["target"] = {
    kind: "http",
    workflowId: "p_flow",
    request: {
      method: "PATCH",
      url: "https://example.com/items/1",
      params: { v: "2" },
      headers: { "X-Trace": "t-1" },
      auth: { username: "ada", password: "secret" },
      data: { done: true },
    },
  };

  it("sends an http target's own request, unsigned, through the sender", async () => {
    const { deps } = sendDeps(recordingSink([]).sink);
    const { sender, sent } = scriptedSender([{ status: 204 }]);
    const outcome = await attemptDelivery(deps, sender, sendDelivery(httpTarget), NOW, settings);
    expect(outcome).toEqual({ kind: "delivered", status: 204, attempts: 1 });
    expect(sent).toEqual([
      {
        method: "PATCH",
        url: "https://example.com/items/1?v=2",
        headers: {
          "X-Trace": "t-1",
          authorization: `Basic ${Buffer.from("ada:secret").toString("base64")}`,
          "content-type": "application/json",
          "x-sluice-hops": "1",
        },
        body: '{"done":true}',
      },
    ]);
  });

  it("retries a failed http send, then keeps it as a dead letter under the workflow", async () => {
    const { deps, deadLetters } = sendDeps(recordingSink([]).sink);
    const { sender } = scriptedSender([{ status: 500 }, { error: "ECONNREFUSED: example.com refused the connection" }]);
    const first = await attemptDelivery(deps, sender, sendDelivery(httpTarget), NOW, settings);
    expect(first).toMatchObject({ kind: "retry", attempts: 1, error: "HTTP 500" });
    const last = await attemptDelivery(deps, sender, sendDelivery(httpTarget, 2), NOW, settings);
    expect(last).toMatchObject({ kind: "dead", attempts: 3 });
    const kept = await deadLetters.listDeadLetters("p_flow", { limit: 10 });
    expect(kept.items).toHaveLength(1);
    expect(kept.items[0]).toMatchObject({ target: httpTarget, userId: "u_ada", attempts: 3 });
  });

  it("does not retry a 508 of a send's receiver: the send carried its hop count, so it is a loop refusal", async () => {
    const { deps, deadLetters } = sendDeps(recordingSink([]).sink);
    const { sender } = scriptedSender([{ status: 508 }]);
    expect(await attemptDelivery(deps, sender, sendDelivery(httpTarget), NOW, settings)).toMatchObject({
      kind: "dead",
      attempts: 1,
      error: "HTTP 508 (a delivery loop: not retried)",
    });
    expect((await deadLetters.listDeadLetters("p_flow", { limit: 10 })).items).toHaveLength(1);
  });

  it("drops a send of a workflow deleted meanwhile, sending nothing", async () => {
    const { deps } = sendDeps(recordingSink([]).sink, {});
    const { sender, sent } = scriptedSender([]);
    const outcome = await attemptDelivery(deps, sender, sendDelivery(httpTarget), NOW, settings);
    expect(outcome).toEqual({ kind: "dropped", reason: "the workflow was deleted" });
    expect(sent).toEqual([]);
  });

  it("writes an s3 target through the object sink as JSON, and retries what the sink refused", async () => {
    const target: DeliveryRecord["target"] = {
      kind: "s3",
      workflowId: "p_flow",
      bucket: "orders",
      key: `in/${RUN}-0.json`,
      body: { total: 12.5, items: ["é"] },
    };
    const stored = recordingSink(["orders"]);
    const { sender, sent } = scriptedSender([]);
    const ok = await attemptDelivery(sendDeps(stored.sink).deps, sender, sendDelivery(target), NOW, settings);
    expect(ok).toEqual({ kind: "delivered", status: 200, attempts: 1 });
    expect(stored.puts).toEqual([
      {
        bucket: "orders",
        key: `in/${RUN}-0.json`,
        body: '{"total":12.5,"items":["é"]}',
        contentType: "application/json",
      },
    ]);
    expect(sent).toEqual([]);
    const refusing = recordingSink(["orders"], { error: "AccessDenied: no" });
    const failed = await attemptDelivery(sendDeps(refusing.sink).deps, sender, sendDelivery(target), NOW, settings);
    expect(failed).toMatchObject({ kind: "retry", attempts: 1, error: "AccessDenied: no" });
  });
});
