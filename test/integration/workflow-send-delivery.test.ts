/**
 * A workflow's `$.send.http` and `$.send.s3` delivered below the HTTP API: `queueWorkflowSends`
 * queues them in the SQLite delivery queue, the local worker attempts them with the real sender,
 * to a receiver on 127.0.0.1, and with the local object sink, to files. Retry delays are tiny;
 * every wait polls with a deadline.
 */
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";
import { LocalObjectSink } from "#adapters/local/local-object-sink";
import { SqliteDeliveryQueue } from "#adapters/local/sqlite-delivery-queue";
import { formatId } from "#core/ids";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import type { DeliverySettings } from "#core/webhook-delivery";
import type { WorkflowRecord } from "#core/workflow-model";
import { type DeliveredSend, queueWorkflowSends, sendDeliveryId } from "#core/workflow-sends";
import { LocalDeliveryWorker } from "#local-mode/drivers/delivery-worker";
import { eventually, when } from "../support/eventually.ts";
import { memoryDeps } from "../support/memory-deps.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/** Fast retries: the whole policy fits in well under a second. */
const FAST: Partial<DeliverySettings> = { baseDelayMs: 10, maxDelayMs: 40, maxAttempts: 4, timeoutMs: 2_000 };

const waitFor = (what: string, condition: () => boolean | Promise<boolean>) =>
  eventually(async () => when(await condition()), what, { timeoutMs: 10_000, intervalMs: 10 });

function workflowRecord(id: string): WorkflowRecord {
  return {
    id,
    userId: "u_ada",
    workspaceId: "o_ada",
    projectId: "proj_ada",
    name: "Sends",
    active: true,
    deploymentId: "d_1",
    steps: [],
    triggers: [],
    createdAt: 0,
    updatedAt: 0,
  };
}

let deps: Deps;
let queue: SqliteDeliveryQueue;
let worker: LocalDeliveryWorker;
let sender: Http1WebhookSender;
let receiver: WebhookReceiver;
let dataDir: string;
const FLOW = { id: "p_sender", userId: "u_ada", workspaceId: "o_ada" };
const runId = (n: number) => formatId("run", Date.now(), new Uint8Array(12).fill(n));

beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "sluice-sends-"));
  const memory = memoryDeps();
  queue = new SqliteDeliveryQueue(memory.sqlite, { leaseMs: 5_000 });
  deps = { ...memory, clock: systemClock, deliveries: queue, objects: new LocalObjectSink(dataDir, ["orders"]) };
  await deps.workflows.createWorkflow(workflowRecord(FLOW.id));
  sender = new Http1WebhookSender({ allowPrivateAddresses: true });
  receiver = await WebhookReceiver.start();
  worker = new LocalDeliveryWorker({ queue, deps, sender, settings: FAST, concurrency: 4 });
  worker.start();
});

afterEach(async () => {
  await worker.stop(2_000);
  sender.close();
  await receiver.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe("a workflow's sends, delivered", () => {
  it("sends each $.send.http as the user wrote it, unsigned, in the order the run sent them", async () => {
    const sends: DeliveredSend[] = [1, 2, 3].map((n) => ({
      type: "http",
      method: n === 2 ? "PUT" : "POST",
      url: receiver.url(`/in/${n}`),
      params: { n: String(n) },
      headers: { "X-Order": String(n), Connection: "close" },
      auth: { username: "ada", password: "pw" },
      data: { n },
    }));
    const run = runId(1);
    expect(await queueWorkflowSends(deps, FLOW, run, sends, Date.now())).toEqual([]);
    await waitFor("three requests", () => receiver.delivered.length === 3);
    expect(receiver.requests.map((r) => [r.method, r.path, r.body])).toEqual([
      ["POST", "/in/1?n=1", '{"n":1}'],
      ["PUT", "/in/2?n=2", '{"n":2}'],
      ["POST", "/in/3?n=3", '{"n":3}'],
    ]);
    const [first] = receiver.requests;
    expect(first?.headers["x-order"]).toBe("1");
    expect(first?.headers.authorization).toBe(`Basic ${Buffer.from("ada:pw").toString("base64")}`);
    expect(first?.headers["content-type"]).toBe("application/json");
    // No signing or delivery header of Sluice's: only the hop count, which ends a loop through a trigger.
    expect(Object.keys(first?.headers ?? {}).filter((name) => /sluice|webhook-/.test(name))).toEqual(["x-sluice-hops"]);
    expect(first?.headers["x-sluice-hops"]).toBe("1");
    await waitFor("the queue to empty", () => queue.size() === 0);
  });

  it("retries a failing receiver with the same request, then keeps a dead letter under the workflow", async () => {
    receiver.status = 503;
    const run = runId(2);
    const send: DeliveredSend = { type: "http", method: "POST", url: receiver.url("/down"), data: { x: 1 } };
    await queueWorkflowSends(deps, FLOW, run, [send], Date.now());
    const id = sendDeliveryId(FLOW.id, run, 0);
    await waitFor("the dead letter", async () => (await deps.deadLetters.getDeadLetter(FLOW.id, id)) !== undefined);
    expect(receiver.requests).toHaveLength(4);
    expect(new Set(receiver.requests.map((r) => r.body))).toEqual(new Set(['{"x":1}']));
    const dead = await deps.deadLetters.getDeadLetter(FLOW.id, id);
    expect(dead).toMatchObject({ attempts: 4, lastError: "HTTP 503", userId: "u_ada", eventId: run });
    expect(dead?.target).toMatchObject({ kind: "http", workflowId: FLOW.id });
    expect(queue.size()).toBe(0);
  });

  it("recovers when the receiver comes back within the retries, and delivers once", async () => {
    receiver.status = 500;
    const run = runId(3);
    await queueWorkflowSends(deps, FLOW, run, [{ type: "http", method: "POST", url: receiver.url() }], Date.now());
    await waitFor("a failed attempt", () => receiver.refused.length >= 1);
    receiver.status = 200;
    await waitFor("a delivery", () => receiver.delivered.length === 1);
    await waitFor("the queue to empty", () => queue.size() === 0);
    expect(await deps.deadLetters.getDeadLetter(FLOW.id, sendDeliveryId(FLOW.id, run, 0))).toBeUndefined();
  });

  it("writes a $.send.s3 to <data dir>/s3/<bucket>/<prefix><run>-<index>.json, private to the server", async () => {
    const run = runId(4);
    const sends: DeliveredSend[] = [
      { type: "http", method: "GET", url: receiver.url() },
      { type: "s3", bucket: "orders", prefix: "daily/2026/", payload: { total: 3, items: ["é"] } },
    ];
    expect(await queueWorkflowSends(deps, FLOW, run, sends, Date.now())).toEqual([]);
    const file = join(dataDir, "s3", "orders", "daily", "2026", `${run}-1.json`);
    await waitFor("the object", async () => (await stat(file).catch(() => undefined)) !== undefined);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ total: 3, items: ["é"] });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dataDir, "s3", "orders", "daily"))).mode & 0o777).toBe(0o700);
  });
});

describe("Http1WebhookSender with a method", () => {
  it("sends a GET without a body or a Content-Length, and a DELETE with its body", async () => {
    expect(await sender.post(receiver.url("/g"), { accept: "text/csv" }, "", 2_000, "GET")).toEqual({ status: 200 });
    expect(await sender.post(receiver.url("/d"), {}, "{}", 2_000, "DELETE")).toEqual({ status: 200 });
    const [get, del] = receiver.requests;
    expect([get?.method, get?.headers["content-length"], get?.headers["transfer-encoding"], get?.body]).toEqual([
      "GET",
      undefined,
      undefined,
      "",
    ]);
    expect([del?.method, del?.headers["content-length"], del?.body]).toEqual(["DELETE", "2", "{}"]);
  });

  it("answers an error, never a throw, for a method that is not a token", async () => {
    for (const method of ["GET /x HTTP/1.1\r\nHost: y\r\n\r\nGET", "get", "", "PO ST"]) {
      expect(await sender.post(receiver.url(), {}, "", 2_000, method)).toEqual({ error: "invalid HTTP method" });
    }
    expect(receiver.requests).toEqual([]);
  });
});
