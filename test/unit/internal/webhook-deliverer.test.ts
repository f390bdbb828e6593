import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { mockClient } from "aws-sdk-client-mock";
import { Webhook } from "standardwebhooks";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqsDeliveryRetryQueue } from "#adapters/aws/sqs-delivery-queue";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";
import type { Deps } from "#core/ports/deps";
import { jsonLogger } from "#core/ports/logger";
import { type DeliveryRecord, destinationOf } from "#core/subscription-model";
import { verifyWebhookSignature } from "#core/webhook-signature";
import { createWebhook } from "#core/webhooks";
import {
  createWebhookDelivererHandler,
  deliveryRecordSchema,
  type WebhookDelivererOptions,
} from "#internal/webhook-deliverer";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";

const sqsMock = mockClient(SQSClient);
const NOW = Date.UTC(2026, 10, 20, 12);
const FIFO_ARN = "arn:aws:sqs:eu-west-1:123456789012:SluiceService-Deliveries.fifo";
const RETRY_ARN = "arn:aws:sqs:eu-west-1:123456789012:SluiceService-Retries";
const RETRY_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/SluiceService-Retries";

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on 127.0.0.1 that answers each request with `status(path)`. */
async function startReceiver(status: (path: string) => number = () => 204) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const path = req.url ?? "";
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(status(path)).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  servers.push(server);
  return { received, url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

const servers: Server[] = [];

async function setup(
  status?: (path: string) => number,
  options: Partial<WebhookDelivererOptions> = {},
  webhookPaths = ["/a", "/b"],
) {
  const receiver = await startReceiver(status);
  const lines: Record<string, unknown>[] = [];
  const base = memoryDeps(NOW);
  const deps: Deps = { ...base, log: jsonLogger({}, (line) => lines.push(JSON.parse(line))) };
  const { user } = await accountIn(deps, "ada");
  const webhooks = [];
  for (const path of webhookPaths) {
    webhooks.push(await createWebhook(deps, { userId: user.id }, { url: receiver.url(path) }));
  }
  const retryQueue = new SqsDeliveryRetryQueue({
    sqs: new SQSClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    queueUrl: RETRY_URL,
  });
  const handler = createWebhookDelivererHandler({
    loadDeps: async () => deps,
    // Loopback is refused on AWS; this receiver lives on it (the default is tested below).
    sender: new Http1WebhookSender({ allowPrivateAddresses: true }),
    retryQueue: async () => retryQueue,
    settings: { random: () => 0.5, timeoutMs: 3_000 },
    ...options,
  });
  return { deps, base, lines, receiver, webhooks, handler };
}

let deliveryCounter = 0;
function delivery(webhookId: string, overrides: Partial<DeliveryRecord> = {}): DeliveryRecord {
  deliveryCounter++;
  const eventId = `${NOW}-${deliveryCounter}`;
  return {
    id: `dlv_01kab00000${String(deliveryCounter).padStart(12, "0")}`,
    target: { kind: "webhook", webhookId },
    subscriptionIds: ["sub_01kab00000aaaaaaaaaaaa"],
    emitterId: "dc_01kab00000bbbbbbbbbbbb",
    eventId,
    channel: "",
    payload: { id: eventId, event: { n: deliveryCounter } },
    attempts: 0,
    nextAttemptAt: NOW,
    createdAt: NOW,
    ...overrides,
  };
}

/** An SQS event as Lambda's event source mapping hands it over. */
function sqsEvent(messages: { delivery: DeliveryRecord | string; from: "fifo" | "retry"; messageId?: string }[]) {
  return {
    Records: messages.map(({ delivery: body, from, messageId }, index) => ({
      messageId: messageId ?? `m${index}`,
      receiptHandle: `rh${index}`,
      body: typeof body === "string" ? body : JSON.stringify(body),
      attributes: {
        ApproximateReceiveCount: "1",
        SentTimestamp: String(NOW),
        SenderId: "AROAEXAMPLE",
        ApproximateFirstReceiveTimestamp: String(NOW),
        ...(from === "fifo" && typeof body !== "string"
          ? { MessageGroupId: destinationOf(body), MessageDeduplicationId: `${body.id}-${body.nextAttemptAt}` }
          : {}),
      },
      messageAttributes: {},
      md5OfBody: "x",
      eventSource: "aws:sqs",
      eventSourceARN: from === "fifo" ? FIFO_ARN : RETRY_ARN,
      awsRegion: "eu-west-1",
    })),
  };
}

const retrySends = () =>
  sqsMock.commandCalls(SendMessageCommand).map((call) => {
    const { MessageBody, ...rest } = call.args[0].input;
    return { ...rest, delivery: JSON.parse(MessageBody ?? "") as DeliveryRecord };
  });

beforeEach(() => {
  sqsMock.reset();
  sqsMock.on(SendMessageCommand).resolves({ MessageId: "m" });
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

describe("the webhook deliverer function", () => {
  it("POSTs a queued delivery, signed with the webhook's secret, and reports no failure", async () => {
    const { handler, receiver, webhooks } = await setup();
    const queued = delivery(webhooks[0]!.id);
    const result = await handler(sqsEvent([{ delivery: queued, from: "fifo" }]));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(receiver.received).toHaveLength(1);
    const [request] = receiver.received;
    expect(request!.path).toBe("/a");
    expect(request!.body).toBe(JSON.stringify(queued.payload));
    expect(request!.headers).toMatchObject({
      "x-sluice-delivery-id": queued.id,
      "x-sluice-event-id": queued.eventId,
      "x-sluice-subscription-id": queued.subscriptionIds[0],
      "x-sluice-timestamp": String(NOW / 1000),
    });
    const signature = request!.headers["x-sluice-signature"] as string;
    expect(verifyWebhookSignature(webhooks[0]!.signing_secret, signature, request!.body, 300, NOW / 1000)).toBe(true);
    // The Standard Webhooks headers too: the library signs the same (it verifies only near its own clock).
    expect(request!.headers).toMatchObject({ "webhook-id": queued.id, "webhook-timestamp": String(NOW / 1000) });
    const standard = new Webhook(webhooks[0]!.signing_secret).sign(queued.id, new Date(NOW), request!.body);
    expect(request!.headers["webhook-signature"]).toBe(standard);
    expect(sqsMock.calls()).toHaveLength(0);
  });

  it("sends a failed delivery to the retry queue, delayed until its next attempt, and goes on with its webhook's next one", async () => {
    const failing = new Set<string>();
    const { handler, receiver, webhooks, lines } = await setup((path) => (failing.has(path) ? 503 : 200), {}, [
      "/a",
      "/b",
    ]);
    const [a, b] = webhooks.map((webhook) => webhook!.id) as [string, string];
    failing.add("/a");
    const first = delivery(a);
    const second = delivery(a);
    const other = delivery(b);
    const result = await handler(
      sqsEvent([
        { delivery: first, from: "fifo" },
        { delivery: other, from: "fifo" },
        { delivery: second, from: "fifo" },
      ]),
    );
    expect(result).toEqual({ batchItemFailures: [] });
    // Webhook a got its two deliveries in queue order; the failure did not hold the second up.
    expect(receiver.received.filter((r) => r.path === "/a").map((r) => r.headers["x-sluice-delivery-id"])).toEqual([
      first.id,
      second.id,
    ]);
    expect(receiver.received.filter((r) => r.path === "/b")).toHaveLength(1);
    // random 0.5 of the first bound (30 s): due 15 s later.
    const due = NOW + 15_000;
    expect(retrySends()).toEqual([
      {
        QueueUrl: RETRY_URL,
        DelaySeconds: 15,
        delivery: { ...first, attempts: 1, nextAttemptAt: due, lastError: "HTTP 503" },
      },
      {
        QueueUrl: RETRY_URL,
        DelaySeconds: 15,
        delivery: { ...second, attempts: 1, nextAttemptAt: due, lastError: "HTTP 503" },
      },
    ]);
    expect(lines).toMatchObject([
      { level: "info", message: "webhook delivery failed; it will be retried", delivery_id: first.id, attempts: 1 },
      { level: "info", message: "webhook delivery failed; it will be retried", delivery_id: second.id, attempts: 1 },
    ]);
  });

  it("sends a retry that is not due yet back to the retry queue, delayed again, without attempting it", async () => {
    const { handler, receiver, webhooks } = await setup();
    const waiting = delivery(webhooks[0]!.id, { attempts: 7, nextAttemptAt: NOW + 25 * 60_000, lastError: "HTTP 500" });
    const result = await handler(sqsEvent([{ delivery: waiting, from: "retry" }]));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(receiver.received).toEqual([]);
    expect(retrySends()).toEqual([{ QueueUrl: RETRY_URL, DelaySeconds: 900, delivery: waiting }]);
  });

  it("attempts a retry that is due, and keeps the attempts count across retries", async () => {
    const { handler, receiver, webhooks } = await setup((path) => (path === "/b" ? 500 : 200));
    const due = delivery(webhooks[0]!.id, { attempts: 2, nextAttemptAt: NOW + 400, lastError: "HTTP 500" });
    const again = delivery(webhooks[1]!.id, { attempts: 2, nextAttemptAt: NOW - 5, lastError: "HTTP 500" });
    const result = await handler(
      sqsEvent([
        { delivery: due, from: "retry" },
        { delivery: again, from: "retry" },
      ]),
    );
    expect(result).toEqual({ batchItemFailures: [] });
    expect(receiver.received.map((r) => r.headers["x-sluice-delivery-id"]).sort()).toEqual([due.id, again.id].sort());
    // After 3 failures the bound is 2 minutes: due in 60 s with random 0.5.
    expect(retrySends()).toEqual([
      {
        QueueUrl: RETRY_URL,
        DelaySeconds: 60,
        delivery: { ...again, attempts: 3, nextAttemptAt: NOW + 60_000, lastError: "HTTP 500" },
      },
    ]);
  });

  it("keeps a delivery whose last attempt fails as a dead letter, and sends nothing to the retry queue", async () => {
    const { handler, webhooks, deps, lines } = await setup(() => 410);
    const last = delivery(webhooks[0]!.id, { attempts: 7, lastError: "HTTP 500" });
    expect(await handler(sqsEvent([{ delivery: last, from: "retry" }]))).toEqual({ batchItemFailures: [] });
    expect(sqsMock.calls()).toHaveLength(0);
    const deadLetter = await deps.deadLetters.getDeadLetter(webhooks[0]!.id, last.id);
    expect(deadLetter).toMatchObject({ id: last.id, attempts: 8, lastError: "HTTP 410", payload: last.payload });
    expect(lines).toMatchObject([{ level: "warn", message: expect.stringMatching(/dead letter/), attempts: 8 }]);
  });

  it("drops a delivery to a deleted webhook without a request", async () => {
    const { handler, receiver, lines } = await setup();
    const orphan = delivery("wh_01kab00000ccccccccccccc");
    expect(await handler(sqsEvent([{ delivery: orphan, from: "fifo" }]))).toEqual({ batchItemFailures: [] });
    expect(receiver.received).toEqual([]);
    expect(sqsMock.calls()).toHaveLength(0);
    expect(lines).toMatchObject([{ level: "info", message: "webhook delivery dropped" }]);
  });

  it("fails a message Sluice could not handle, with the later ones of its group, and not the other groups", async () => {
    const { handler, receiver, webhooks, lines } = await setup((path) => (path === "/a" ? 503 : 204));
    sqsMock.reset();
    sqsMock.on(SendMessageCommand).rejects(new Error("AWS.SimpleQueueService.NonExistentQueue"));
    const [a, b] = webhooks.map((webhook) => webhook!.id) as [string, string];
    const result = await handler(
      sqsEvent([
        { delivery: delivery(a), from: "fifo", messageId: "a1" },
        { delivery: delivery(b), from: "fifo", messageId: "b1" },
        { delivery: delivery(a), from: "fifo", messageId: "a2" },
        { delivery: delivery(b), from: "fifo", messageId: "b2" },
      ]),
    );
    expect(result.batchItemFailures.map((failure) => failure.itemIdentifier).sort()).toEqual(["a1", "a2"]);
    // a2 was not attempted: it must not reach the receiver before a1.
    expect(receiver.received.map((r) => r.path).sort()).toEqual(["/a", "/b", "/b"]);
    expect(lines).toMatchObject([{ level: "error", message: expect.stringMatching(/could not be attempted/) }]);
  });

  it("reads a message queued by a version before workflows (a top-level webhookId) as a webhook delivery", () => {
    const { target: _target, ...rest } = delivery("wh_old");
    const parsed = deliveryRecordSchema.parse({ ...rest, webhookId: "wh_old" });
    expect(parsed).toEqual({ ...rest, target: { kind: "webhook", webhookId: "wh_old" } });
    expect(deliveryRecordSchema.safeParse(rest).success).toBe(false);
    const send = delivery("unused", {
      target: { kind: "http", workflowId: "p_flow", request: { method: "POST", url: "https://example.com/" } },
    });
    expect(deliveryRecordSchema.parse(JSON.parse(JSON.stringify(send)))).toEqual(send);
  });

  it("drops a malformed message with an error in the log", async () => {
    const { handler, receiver, lines } = await setup();
    const result = await handler(
      sqsEvent([
        { delivery: "not json", from: "fifo" },
        { delivery: JSON.stringify({ id: "dlv_x" }), from: "retry" },
      ]),
    );
    expect(result).toEqual({ batchItemFailures: [] });
    expect(receiver.received).toEqual([]);
    expect(lines).toMatchObject([
      { level: "error", message: "malformed webhook delivery dropped", message_id: "m0" },
      { level: "error", message: "malformed webhook delivery dropped", message_id: "m1" },
    ]);
  });

  it("refuses loopback addresses with its default sender, as deployed on AWS", async () => {
    // No sender given: the function's own.
    const { handler, receiver, webhooks } = await setup(undefined, { sender: undefined });
    const queued = delivery(webhooks[0]!.id);
    expect(await handler(sqsEvent([{ delivery: queued, from: "fifo" }]))).toEqual({ batchItemFailures: [] });
    expect(receiver.received).toEqual([]);
    expect(retrySends()).toEqual([
      expect.objectContaining({
        delivery: expect.objectContaining({ attempts: 1, lastError: expect.stringMatching(/^refused: /) }),
      }),
    ]);
  });
});
