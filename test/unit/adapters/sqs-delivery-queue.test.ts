import { SendMessageBatchCommand, SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { delaySecondsUntil, SqsDeliveryQueue, SqsDeliveryRetryQueue } from "#adapters/aws/sqs-delivery-queue";
import { SQS_MAX_MESSAGE_BYTES } from "#config/shared-names";
import { type DeliveryRecord, destinationOf } from "#core/subscription-model";

const sqsMock = mockClient(SQSClient);
const QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/SluiceService-Deliveries.fifo";
const RETRY_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/SluiceService-Retries";
const NOW = Date.UTC(2026, 10, 20, 12);
const client = () => new SQSClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });

function delivery(n: number, webhookId = "wh_a", payload: unknown = { n }): DeliveryRecord {
  return {
    id: `dlv_${String(n).padStart(22, "0")}`,
    target: { kind: "webhook", webhookId },
    subscriptionIds: ["sub_1"],
    emitterId: "dc_one",
    eventId: `${NOW}-${n}`,
    channel: "",
    payload: payload as DeliveryRecord["payload"],
    attempts: 0,
    nextAttemptAt: NOW,
    createdAt: NOW,
  };
}

function queue(waits: number[] = []) {
  return new SqsDeliveryQueue({
    sqs: client(),
    queueUrl: QUEUE_URL,
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
}

const batchCalls = () => sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
const acceptAll = () =>
  sqsMock.on(SendMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `m${entry.Id}` })),
    Failed: [],
  }));

beforeEach(() => {
  sqsMock.reset();
});

describe("SqsDeliveryQueue", () => {
  it("sends each delivery in order, grouped by webhook and deduplicated by its id and due time", async () => {
    acceptAll();
    const deliveries = [delivery(0, "wh_a"), delivery(1, "wh_b"), { ...delivery(2, "wh_a"), nextAttemptAt: NOW + 7 }];
    await queue().enqueue(deliveries);
    expect(batchCalls()).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: deliveries.map((d, index) => ({
          Id: String(index),
          MessageBody: JSON.stringify(d),
          MessageGroupId: destinationOf(d),
          MessageDeduplicationId: `${d.id}-${d.nextAttemptAt}`,
        })),
      },
    ]);
  });

  it("groups a workflow's sends by the workflow, apart from its webhooks", async () => {
    acceptAll();
    const send = {
      ...delivery(0),
      target: { kind: "http" as const, workflowId: "p_flow", request: { method: "POST", url: "https://x.test/" } },
    };
    await queue().enqueue([send, delivery(1, "wh_a")]);
    expect(batchCalls()[0]?.Entries?.map((entry: { MessageGroupId?: string }) => entry.MessageGroupId)).toEqual([
      "p_flow",
      "wh_a",
    ]);
  });

  it("sends batches of at most 10 messages, one after the other, in order", async () => {
    acceptAll();
    const deliveries = Array.from({ length: 23 }, (_, n) => delivery(n));
    await queue().enqueue(deliveries);
    const calls = batchCalls();
    expect(calls.map((input) => input.Entries?.length)).toEqual([10, 10, 3]);
    const sent = calls.flatMap((input) => input.Entries ?? []).map((entry) => JSON.parse(entry.MessageBody ?? ""));
    expect(sent).toEqual(deliveries);
  });

  it("keeps a batch under SQS's size limit", async () => {
    acceptAll();
    const payload = "p".repeat(400 * 1024);
    await queue().enqueue([0, 1, 2, 3].map((n) => delivery(n, "wh_a", payload)));
    const calls = batchCalls();
    expect(calls.map((input) => input.Entries?.length)).toEqual([2, 2]);
    for (const input of calls) {
      const bytes = (input.Entries ?? []).reduce(
        (total, entry) => total + Buffer.byteLength(entry.MessageBody ?? ""),
        0,
      );
      expect(bytes).toBeLessThanOrEqual(SQS_MAX_MESSAGE_BYTES);
    }
  });

  it("sends nothing and rejects when a delivery is larger than a message may be", async () => {
    acceptAll();
    await expect(
      queue().enqueue([delivery(0), delivery(1, "wh_a", "x".repeat(SQS_MAX_MESSAGE_BYTES))]),
    ).rejects.toThrow(/delivery dlv_0+1 is \d+ bytes, over SQS's/);
    expect(sqsMock.calls()).toHaveLength(0);
  });

  it("sends again only the entries SQS failed, then resolves", async () => {
    sqsMock
      .on(SendMessageBatchCommand)
      .resolvesOnce({
        Successful: [{ Id: "1", MessageId: "m1", MD5OfMessageBody: "x" }],
        Failed: [
          { Id: "0", SenderFault: false, Code: "InternalError", Message: "try again" },
          { Id: "2", SenderFault: false, Code: "InternalError", Message: "try again" },
        ],
      })
      .resolves({ Successful: [], Failed: [] });
    const waits: number[] = [];
    const deliveries = [delivery(0), delivery(1), delivery(2)];
    await queue(waits).enqueue(deliveries);
    const calls = batchCalls();
    expect(calls).toHaveLength(2);
    expect(calls[1]?.Entries?.map((entry) => [entry.Id, JSON.parse(entry.MessageBody ?? "").id])).toEqual([
      ["0", deliveries[0]?.id],
      ["2", deliveries[2]?.id],
    ]);
    expect(waits).toEqual([100]);
  });

  it("rejects when SQS keeps failing an entry, or refuses one as the sender's fault", async () => {
    sqsMock.on(SendMessageBatchCommand).resolves({
      Successful: [],
      Failed: [{ Id: "0", SenderFault: false, Code: "InternalError", Message: "down" }],
    });
    await expect(queue().enqueue([delivery(0)])).rejects.toThrow(
      "1 of 1 webhook deliveries could not be queued: InternalError: down",
    );
    expect(batchCalls()).toHaveLength(3);

    sqsMock.reset();
    sqsMock.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: "0", MessageId: "m0", MD5OfMessageBody: "x" }],
      Failed: [{ Id: "1", SenderFault: true, Code: "InvalidParameterValue", Message: "bad group" }],
    });
    await expect(queue().enqueue([delivery(0), delivery(1)])).rejects.toThrow(/InvalidParameterValue: bad group/);
    expect(batchCalls()).toHaveLength(1);
  });

  it("rejects when the request fails", async () => {
    sqsMock.on(SendMessageBatchCommand).rejects(new Error("AccessDenied"));
    await expect(queue().enqueue([delivery(0)])).rejects.toThrow("AccessDenied");
  });
});

describe("SqsDeliveryRetryQueue", () => {
  it("sends the delivery to the retry queue, delayed until it is due, 15 minutes at most", async () => {
    sqsMock.on(SendMessageCommand).resolves({ MessageId: "m" });
    const retries = new SqsDeliveryRetryQueue({ sqs: client(), queueUrl: RETRY_URL });
    const soon = { ...delivery(0), attempts: 3, nextAttemptAt: NOW + 61_001, lastError: "HTTP 503" };
    const later = { ...delivery(1), attempts: 7, nextAttemptAt: NOW + 30 * 60_000 };
    await retries.schedule(soon, NOW);
    await retries.schedule(later, NOW);
    await retries.schedule(delivery(2), NOW + 5);
    expect(sqsMock.commandCalls(SendMessageCommand).map((call) => call.args[0].input)).toEqual([
      { QueueUrl: RETRY_URL, MessageBody: JSON.stringify(soon), DelaySeconds: 62 },
      { QueueUrl: RETRY_URL, MessageBody: JSON.stringify(later), DelaySeconds: 900 },
      { QueueUrl: RETRY_URL, MessageBody: JSON.stringify(delivery(2)), DelaySeconds: 0 },
    ]);
  });

  it("rounds waits up to whole seconds", () => {
    expect(delaySecondsUntil(NOW + 1, NOW)).toBe(1);
    expect(delaySecondsUntil(NOW + 1000, NOW)).toBe(1);
    expect(delaySecondsUntil(NOW - 5000, NOW)).toBe(0);
    expect(delaySecondsUntil(NOW + 901_000, NOW)).toBe(900);
  });
});
