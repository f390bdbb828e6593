import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { EventBridgeEventBus } from "#adapters/aws/eventbridge-event-bus";
import { SqsDeliveryQueue } from "#adapters/aws/sqs-delivery-queue";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE } from "#config/shared-names";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { deliveryIdFor } from "#core/dispatcher";
import { sseEnvelope } from "#core/event-views";
import type { Deps } from "#core/ports/deps";
import { jsonLogger } from "#core/ports/logger";
import type { SourceRunJob } from "#core/ports/run-queue";
import { type DeliveryRecord, destinationOf } from "#core/subscription-model";
import { createSubscription } from "#core/subscriptions";
import { createWebhook } from "#core/webhooks";
import { createEventDispatcherHandler } from "#internal/event-dispatcher";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

const sqsMock = mockClient(SQSClient);
const eventBridgeMock = mockClient(EventBridgeClient);
const QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/SluiceService-Deliveries.fifo";
const NOW = Date.UTC(2026, 10, 20, 12);

/** What EventBridge hands the rule's Lambda target. */
const eventBridgeEvent = (detail: unknown) => ({
  version: "0",
  id: "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
  "detail-type": EVENT_DETAIL_TYPE,
  source: EVENT_SOURCE,
  account: "123456789012",
  time: "2026-11-20T12:00:01Z",
  region: "eu-west-1",
  resources: [],
  detail,
});

async function setup() {
  const runs: SourceRunJob[] = [];
  const lines: Record<string, unknown>[] = [];
  const base = memoryDeps(NOW, {
    deliveries: new SqsDeliveryQueue({
      sqs: new SQSClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
      queueUrl: QUEUE_URL,
      sleep: async () => {},
    }),
    runs: {
      enqueue: async (job) => {
        runs.push(job as SourceRunJob);
      },
    },
  });
  const deps: Deps = { ...base, log: jsonLogger({}, (line) => lines.push(JSON.parse(line))) };
  const account = await accountIn(deps, "ada");
  const caller = { userId: account.user.id };
  const owner = { userId: account.user.id, workspaceId: account.workspace.id };
  const emitter = await deps.sources.createSource(sourceRecord(account, deps.ids.newId("source"), NOW));
  const listener = await deps.sources.createSource(sourceRecord(account, deps.ids.newId("source"), NOW));
  const exact = await createWebhook(deps, caller, { url: "https://hooks.example.com/exact" });
  const glob = await createWebhook(deps, caller, { url: "https://hooks.example.com/glob" });
  await createSubscription(deps, caller, { emitter_id: emitter.id, listener_id: exact.id });
  await createSubscription(deps, caller, { emitter_id: emitter.id, listener_id: exact.id, event_name: "big" });
  await createSubscription(deps, caller, { emitter_id: "dc_*", listener_id: glob.id });
  await createSubscription(deps, caller, { emitter_id: emitter.id, listener_id: listener.id });
  const append = (events: Partial<NewEvent>[], at = NOW + 100) =>
    deps.events.appendEvents(
      emitter.id,
      events.map((event, n) => ({ channel: "", event: null, emitId: `emit-${n}`, meta: {}, ...event })),
      at,
    );
  return {
    deps,
    base,
    runs,
    lines,
    owner,
    emitter,
    listener,
    webhooks: { exact: exact.id, glob: glob.id },
    account,
    caller,
    append,
    handler: createEventDispatcherHandler(async () => deps),
  };
}

const sentEntries = () =>
  sqsMock.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries ?? []);
const sentDeliveries = () => sentEntries().map((entry) => JSON.parse(entry.MessageBody ?? "") as DeliveryRecord);

beforeEach(() => {
  eventBridgeMock.reset();
  sqsMock.reset();
  sqsMock.on(SendMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `m${entry.Id}`, MD5OfMessageBody: "x" })),
    Failed: [],
  }));
});

describe("the event dispatcher function", () => {
  it("queues one delivery per event and webhook on the FIFO queue, and a run per event for a listening source", async () => {
    const { handler, append, owner, emitter, listener, webhooks, runs, lines } = await setup();
    const events = await append([{ event: { order: 1 } }, { event: { order: 2 }, meta: { summary: "two" } }]);
    await handler(eventBridgeEvent({ sourceId: emitter.id, owner, events }));

    const storedAt = Math.max(...events.map((event) => event.indexedAtMs));
    const expected = (webhookId: string, event: StoredEvent) => ({
      id: deliveryIdFor(webhookId, emitter.id, event.id),
      target: { kind: "webhook", webhookId },
      emitterId: emitter.id,
      eventId: event.id,
      channel: "",
      payload: JSON.parse(JSON.stringify(sseEnvelope(event))),
      attempts: 0,
      nextAttemptAt: storedAt,
      createdAt: storedAt,
    });
    const sent = sentDeliveries();
    // Events in order; for each, its listeners in id order.
    const [first, second] = [webhooks.exact, webhooks.glob].sort() as [string, string];
    expect(sent).toEqual([
      expect.objectContaining(expected(first, events[0]!)),
      expect.objectContaining(expected(second, events[0]!)),
      expect.objectContaining(expected(first, events[1]!)),
      expect.objectContaining(expected(second, events[1]!)),
    ]);
    expect(
      sentEntries().map(({ MessageGroupId, MessageDeduplicationId }) => [MessageGroupId, MessageDeduplicationId]),
    ).toEqual(sent.map((delivery) => [destinationOf(delivery), `${delivery.id}-${storedAt}`]));
    expect(runs.map((run) => [run.sourceId, run.trigger, run.event])).toEqual([
      [listener.id, "event", { order: 1 }],
      [listener.id, "event", { order: 2 }],
    ]);
    expect(lines).toEqual([]);
  });

  it("dispatches the entries the bus puts, routing by the owner they carry without reading the source", async () => {
    const { handler, append, owner, emitter, webhooks, deps } = await setup();
    eventBridgeMock.on(PutEventsCommand).callsFake((input: { Entries: unknown[] }) => ({
      FailedEntryCount: 0,
      Entries: input.Entries.map(() => ({ EventId: "e" })),
    }));
    const bus = new EventBridgeEventBus({
      eventBridge: new EventBridgeClient({
        region: "eu-west-1",
        credentials: { accessKeyId: "x", secretAccessKey: "x" },
      }),
      busName: "sluice-test",
      log: deps.log,
    });
    const events = await append([{ event: "small" }, { channel: "big", event: "x".repeat(300_000) }]);
    await bus.publish(events, owner);
    // The source is gone: only the owner in the entries can match the dc_* subscription.
    await deps.sources.deleteSource(emitter.id);
    const entries = eventBridgeMock.commandCalls(PutEventsCommand).flatMap((call) => call.args[0].input.Entries ?? []);
    expect(entries).toHaveLength(2);
    for (const entry of entries) await handler(eventBridgeEvent(JSON.parse(entry.Detail ?? "")));
    const [first, second] = [webhooks.exact, webhooks.glob].sort();
    expect(sentDeliveries().map((delivery) => [delivery.eventId, destinationOf(delivery)])).toEqual([
      [events[0]!.id, first],
      [events[0]!.id, second],
      [events[1]!.id, webhooks.exact],
    ]);
  });

  it("reads the source of an entry that carries no owner (put before entries did)", async () => {
    const { handler, append, emitter, webhooks } = await setup();
    const events = await append([{ event: 1 }]);
    await handler(eventBridgeEvent({ sourceId: emitter.id, events }));
    expect(
      sentDeliveries()
        .map((delivery) => destinationOf(delivery))
        .sort(),
    ).toEqual([webhooks.exact, webhooks.glob].sort());
  });

  it("makes byte-identical messages when the same entry is dispatched again (EventBridge or Lambda retried it)", async () => {
    const { handler, append, emitter, deps, base } = await setup();
    const events = await append([{ event: "a" }, { event: "b" }]);
    const entry = eventBridgeEvent({ sourceId: emitter.id, events });
    await handler(entry);
    const first = sentEntries();
    sqsMock.resetHistory();
    // Later: another clock reading, another state of the random id generator.
    base.clock.set(NOW + 60_000);
    deps.ids.newId("delivery");
    await handler(entry);
    expect(sentEntries()).toEqual(first);
    expect(first).toHaveLength(4);
  });

  it("reads an event sent as a reference from the store, on the channel the reference names", async () => {
    const { handler, append, emitter, webhooks, lines } = await setup();
    const [, big] = await append([
      { event: "before" },
      { channel: "big", event: "x".repeat(300_000) },
      { event: "after" },
    ]);
    await handler(eventBridgeEvent({ sourceId: emitter.id, eventId: big!.id, channel: "big" }));
    expect(sentDeliveries()).toEqual([
      expect.objectContaining({
        id: deliveryIdFor(webhooks.exact, emitter.id, big!.id),
        target: { kind: "webhook", webhookId: webhooks.exact },
        eventId: big!.id,
        channel: "big",
        payload: JSON.parse(JSON.stringify(sseEnvelope(big!))),
      }),
    ]);
    expect(lines).toEqual([]);
  });

  it("dispatches a workflow's events: to the p_* glob and the workspace's $errors, and runs of a listening workflow", async () => {
    const { handler, deps, account, caller, owner, runs } = await setup();
    const flow = workflowRecord(account, deps.ids.newId("workflow"), NOW);
    const listening = workflowRecord(account, deps.ids.newId("workflow"), NOW);
    for (const workflow of [flow, listening]) await deps.workflows.createWorkflow(workflow);
    const all = await createWebhook(deps, caller, { url: "https://hooks.example.com/workflows" });
    const errors = await createWebhook(deps, caller, { url: "https://hooks.example.com/errors" });
    await createSubscription(deps, caller, { emitter_id: "p_*", listener_id: all.id });
    await createSubscription(deps, caller, {
      emitter_id: owner.workspaceId,
      listener_id: errors.id,
      event_name: "$errors",
    });
    await createSubscription(deps, caller, { emitter_id: flow.id, listener_id: listening.id });
    const events = await deps.events.appendEvents(
      flow.id,
      [
        { channel: "", event: { raw_event: { n: 1 } }, emitId: "e0", meta: {} },
        { channel: "$errors", event: { error: { code: "Error" } }, emitId: "e1", meta: {} },
      ],
      NOW + 100,
    );
    // Without an owner, the workflow is read.
    await handler(eventBridgeEvent({ sourceId: flow.id, events }));
    expect(sentDeliveries().map((delivery) => [delivery.eventId, destinationOf(delivery)])).toEqual([
      [events[0]!.id, all.id],
      [events[1]!.id, errors.id],
    ]);
    expect(runs).toEqual([
      expect.objectContaining({
        kind: "workflow",
        workflowId: listening.id,
        triggerId: flow.id,
        event: events[0]!.event,
      }),
    ]);
  });

  it("warns and queues nothing when a referenced event no longer exists", async () => {
    const { handler, emitter, lines, runs } = await setup();
    await handler(eventBridgeEvent({ sourceId: emitter.id, eventId: `${NOW}-7`, channel: "big" }));
    expect(sqsMock.calls()).toHaveLength(0);
    expect(runs).toEqual([]);
    expect(lines).toMatchObject([{ level: "warn", source_id: emitter.id, event_id: `${NOW}-7` }]);
  });

  it("drops, with an error in the log, an entry that is not a stored-events entry", async () => {
    const { handler, emitter, lines } = await setup();
    const event = {
      sourceId: emitter.id,
      id: `${NOW}-0`,
      indexedAtMs: NOW,
      channel: "",
      event: 1,
      emitId: "e",
      meta: {},
    };
    await handler({ ...eventBridgeEvent({ sourceId: emitter.id, events: [event] }), source: "aws.s3" });
    await handler(eventBridgeEvent({ sourceId: emitter.id, events: [] }));
    await handler(eventBridgeEvent({ sourceId: emitter.id, events: [{ ...event, sourceId: "dc_someoneelse" }] }));
    await handler(eventBridgeEvent({ sourceId: emitter.id, eventId: "not-an-id", channel: "" }));
    expect(sqsMock.calls()).toHaveLength(0);
    expect(lines).toHaveLength(4);
    for (const line of lines)
      expect(line).toMatchObject({ level: "error", message: "malformed stored events entry dropped" });
  });

  it("fails when the delivery queue refuses the deliveries, so that Lambda retries the dispatch", async () => {
    const { handler, append, emitter } = await setup();
    sqsMock.reset();
    sqsMock.on(SendMessageBatchCommand).rejects(new Error("AWS.SimpleQueueService.NonExistentQueue"));
    const events = await append([{ event: 1 }]);
    await expect(handler(eventBridgeEvent({ sourceId: emitter.id, events }))).rejects.toThrow("NonExistentQueue");
  });
});

/** An SQS batch as Lambda hands it over from the unpublished-events queue. */
const sqsBatch = (...bodies: unknown[]) => ({
  Records: bodies.map((body, index) => ({
    messageId: `m${index}`,
    receiptHandle: `r${index}`,
    body: typeof body === "string" ? body : JSON.stringify(body),
    attributes: { ApproximateReceiveCount: "1" },
    messageAttributes: {},
    md5OfBody: "x",
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:sluice-dev-unpublished-events",
    awsRegion: "eu-west-1",
  })),
});

describe("the event dispatcher function, from the unpublished-events queue", () => {
  it("dispatches entries sent by the bus, left by EventBridge and by failed invocations alike", async () => {
    const { handler, append, owner, emitter, webhooks, lines } = await setup();
    const [a, b, c] = await append([{ event: "a" }, { event: "b" }, { event: "c" }]);
    const result = await handler(
      sqsBatch(
        // What EventBridgeEventBus sends when EventBridge refused the entry.
        {
          source: EVENT_SOURCE,
          "detail-type": EVENT_DETAIL_TYPE,
          detail: { sourceId: emitter.id, owner, events: [a] },
        },
        // What EventBridge puts in the rule's dead-letter queue: the event itself.
        eventBridgeEvent({ sourceId: emitter.id, owner, events: [b] }),
        // What Lambda records for an asynchronous dispatch that failed every retry.
        {
          version: "1.0",
          timestamp: "2026-11-20T12:00:02.000Z",
          requestContext: { requestId: "x", condition: "RetriesExhausted", approximateInvokeCount: 3 },
          requestPayload: eventBridgeEvent({ sourceId: emitter.id, owner, events: [c] }),
          responseContext: { statusCode: 200, executedVersion: "$LATEST", functionError: "Unhandled" },
          responsePayload: { errorMessage: "table throttled" },
        },
      ),
    );
    expect(result).toEqual({ batchItemFailures: [] });
    const [first, second] = [webhooks.exact, webhooks.glob].sort();
    expect(sentDeliveries().map((delivery) => [delivery.eventId, destinationOf(delivery)])).toEqual(
      [a, b, c].flatMap((event) => [
        [event!.id, first],
        [event!.id, second],
      ]),
    );
    expect(lines).toEqual([]);
  });

  it("drops a malformed message with an error in the log, and reports a message whose dispatch failed", async () => {
    const { handler, append, owner, emitter, lines } = await setup();
    const [good, bad] = await append([{ event: "good" }, { event: "bad" }]);
    sqsMock.reset();
    const queued: string[] = [];
    sqsMock.on(SendMessageBatchCommand).callsFake((input: { Entries: { Id: string; MessageBody: string }[] }) => {
      const eventIds = input.Entries.map((entry) => JSON.parse(entry.MessageBody).eventId as string);
      if (eventIds.includes(bad!.id)) throw new Error("AWS.SimpleQueueService.NonExistentQueue");
      queued.push(...eventIds);
      return {
        Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: "m", MD5OfMessageBody: "x" })),
        Failed: [],
      };
    });
    const entryOf = (event: StoredEvent) => eventBridgeEvent({ sourceId: emitter.id, owner, events: [event] });
    const result = await handler(sqsBatch("not json", { source: "aws.s3" }, entryOf(bad!), entryOf(good!)));
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: "m2" }] });
    expect(queued).toEqual([good!.id, good!.id]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: "error",
        message: "malformed queued stored events entry dropped",
        message_id: "m0",
      }),
      expect.objectContaining({
        level: "error",
        message: "malformed queued stored events entry dropped",
        message_id: "m1",
      }),
      expect.objectContaining({
        level: "error",
        message_id: "m2",
        source_id: emitter.id,
        error: expect.stringContaining("NonExistentQueue"),
      }),
    ]);
  });
});
