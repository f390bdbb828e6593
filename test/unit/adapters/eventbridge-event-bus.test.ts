import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { GetQueueUrlCommand, SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import {
  EventBridgeEventBus,
  MAX_ENTRY_BYTES,
  MAX_REQUEST_BYTES,
  type PublishFallback,
  toEntries,
} from "#adapters/aws/eventbridge-event-bus";
import { fallbackQueueNameFor } from "#config/shared-names";
import type { StoredEvent } from "#core/component-model";
import { jsonLogger } from "#core/ports/logger";
import { dispatcherInputSchema } from "#internal/event-dispatcher";

const eventBridgeMock = mockClient(EventBridgeClient);
const sqsMock = mockClient(SQSClient);
const FALLBACK_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/sluice-dev-unpublished-events";
const SOURCE = "dc_01kab00000abcdefghjkmn";
const BUS = "sluice-dev";
const NOW = Date.UTC(2026, 10, 20, 12);
const OWNER = { userId: "u_01kab00000abcdefghjkmn", workspaceId: "o_01kab00000abcdefghjkmn" };

function stored(n: number, event: unknown = { n }, channel = ""): StoredEvent {
  return {
    sourceId: SOURCE,
    id: `${NOW}-${n}`,
    indexedAtMs: NOW,
    channel,
    event: event as StoredEvent["event"],
    emitId: `emit-${n}`,
    meta: { summary: `event ${n}` },
  };
}

function setup(options: { maxAttempts?: number; fallback?: PublishFallback } = {}) {
  const lines: Record<string, unknown>[] = [];
  const waits: number[] = [];
  const bus = new EventBridgeEventBus({
    eventBridge: new EventBridgeClient({
      region: "eu-west-1",
      credentials: { accessKeyId: "x", secretAccessKey: "x" },
    }),
    busName: BUS,
    log: jsonLogger({}, (line) => lines.push(JSON.parse(line))),
    sleep: async (ms) => {
      waits.push(ms);
    },
    ...options,
  });
  return { bus, lines, waits };
}

const putCalls = () => eventBridgeMock.commandCalls(PutEventsCommand).map((call) => call.args[0].input);

beforeEach(() => {
  eventBridgeMock.reset();
  sqsMock.reset();
});

const sqs = () => new SQSClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });
const sentToFallback = () => sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);

/** EventBridge refuses the entry of event 1 (events sent as references) every time. */
function refuseEventOne() {
  eventBridgeMock.on(PutEventsCommand).callsFake((input: { Entries: { Detail: string }[] }) => {
    const results = input.Entries.map((entry) =>
      JSON.parse(entry.Detail).eventId === `${NOW}-1`
        ? { ErrorCode: "ThrottlingException", ErrorMessage: "slow down" }
        : { EventId: "ok" },
    );
    return { FailedEntryCount: results.filter((result) => "ErrorCode" in result).length, Entries: results };
  });
}

describe("EventBridgeEventBus", () => {
  it("puts one publish's events as one entry on the bus, in order, with the owner's two ids, the rule's source and detail type", async () => {
    eventBridgeMock.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: "e1" }] });
    const { bus, lines } = setup();
    const events = [stored(0), stored(1, "é", "$logs"), stored(2, null, "custom")];
    // A whole source record as the owner: only its user and workspace ids travel.
    const source = { ...OWNER, id: SOURCE, configuredProps: { apiKey: "sealed" } };
    await bus.publish(events, source);
    expect(putCalls()).toEqual([
      {
        Entries: [
          {
            EventBusName: BUS,
            Source: "sluice.events",
            DetailType: "event.stored",
            Detail: JSON.stringify({ sourceId: SOURCE, owner: OWNER, events }),
          },
        ],
      },
    ]);
    expect(lines).toEqual([]);
  });

  it("publishes nothing for no events", async () => {
    const { bus } = setup();
    await bus.publish([], OWNER);
    expect(eventBridgeMock.calls()).toHaveLength(0);
  });

  it("splits events over entries under the entry limit, and sends an oversized event as a reference", async () => {
    eventBridgeMock.on(PutEventsCommand).callsFake((input: { Entries: unknown[] }) => ({
      FailedEntryCount: 0,
      Entries: input.Entries.map((_, index) => ({ EventId: `e${index}` })),
    }));
    const { bus } = setup();
    const big = "x".repeat(90 * 1024);
    const huge = "y".repeat(250 * 1024);
    const events = [stored(0, big), stored(1, big), stored(2, big), stored(3, huge, "$logs"), stored(4, "small")];
    await bus.publish(events, OWNER);
    const entries = putCalls().flatMap((input) => input.Entries ?? []);
    const details = entries.map((entry) => JSON.parse(entry.Detail ?? ""));
    expect(details).toEqual([
      { sourceId: SOURCE, owner: OWNER, events: [events[0], events[1]] },
      { sourceId: SOURCE, owner: OWNER, events: [events[2]] },
      { sourceId: SOURCE, owner: OWNER, eventId: `${NOW}-3`, channel: "$logs" },
      { sourceId: SOURCE, owner: OWNER, events: [events[4]] },
    ]);
    const sizeOf = (entry: (typeof entries)[number]) =>
      Buffer.byteLength(`${entry.Source}${entry.DetailType}${entry.Detail}`, "utf8");
    for (const entry of entries) expect(sizeOf(entry)).toBeLessThanOrEqual(MAX_ENTRY_BYTES);
    // Two entries of ~180 KiB cannot share one request.
    for (const input of putCalls()) {
      expect((input.Entries ?? []).reduce((total, entry) => total + sizeOf(entry), 0)).toBeLessThanOrEqual(
        MAX_REQUEST_BYTES,
      );
    }
    expect(putCalls().length).toBeGreaterThan(1);
  });

  it("sends at most 10 entries per PutEvents", async () => {
    eventBridgeMock.on(PutEventsCommand).callsFake((input: { Entries: unknown[] }) => ({
      FailedEntryCount: 0,
      Entries: input.Entries.map(() => ({ EventId: "e" })),
    }));
    const { bus } = setup();
    // 25 events too large to share an entry.
    const events = Array.from({ length: 25 }, (_, n) => stored(n, "z".repeat(MAX_ENTRY_BYTES / 2)));
    expect(toEntries(BUS, events, OWNER)).toHaveLength(25);
    await bus.publish(
      events.map((event) => ({ ...event, event: "small" })),
      OWNER,
    );
    expect(putCalls()).toHaveLength(1);
    eventBridgeMock.resetHistory();
    // 25 reference entries (each event over the entry limit) are small: 10, 10 and 5.
    await bus.publish(
      Array.from({ length: 25 }, (_, n) => stored(n, "w".repeat(MAX_ENTRY_BYTES))),
      OWNER,
    );
    expect(putCalls().map((input) => input.Entries?.length)).toEqual([10, 10, 5]);
  });

  it("puts again only the entries EventBridge refused, until they are accepted", async () => {
    eventBridgeMock
      .on(PutEventsCommand)
      .resolvesOnce({
        FailedEntryCount: 2,
        Entries: [
          { ErrorCode: "ThrottlingException", ErrorMessage: "slow down" },
          { EventId: "ok-1" },
          { ErrorCode: "InternalFailure", ErrorMessage: "oops" },
        ],
      })
      .resolvesOnce({
        FailedEntryCount: 1,
        Entries: [{ EventId: "ok-0" }, { ErrorCode: "InternalFailure", ErrorMessage: "oops" }],
      })
      .resolves({ FailedEntryCount: 0, Entries: [{ EventId: "ok-2" }] });
    const { bus, lines, waits } = setup();
    const events = [0, 1, 2].map((n) => stored(n, "r".repeat(MAX_ENTRY_BYTES)));
    await bus.publish(events, OWNER);
    const eventIdsOf = (input: ReturnType<typeof putCalls>[number]) =>
      (input.Entries ?? []).map((entry) => JSON.parse(entry.Detail ?? "").eventId);
    expect(putCalls().map(eventIdsOf)).toEqual([
      [`${NOW}-0`, `${NOW}-1`, `${NOW}-2`],
      [`${NOW}-0`, `${NOW}-2`],
      [`${NOW}-2`],
    ]);
    expect(waits).toEqual([100, 400]);
    expect(lines).toEqual([]);
  });

  it("logs an error naming the events still refused after the last try, and does not reject", async () => {
    refuseEventOne();
    const { bus, lines } = setup({ maxAttempts: 2 });
    await expect(
      bus.publish([stored(0, "a".repeat(MAX_ENTRY_BYTES)), stored(1, "b".repeat(MAX_ENTRY_BYTES))], OWNER),
    ).resolves.toBeUndefined();
    expect(putCalls().map((input) => input.Entries?.length)).toEqual([2, 1]);
    expect(lines).toEqual([
      expect.objectContaining({
        level: "error",
        message: expect.stringMatching(/could not be published/),
        source_id: SOURCE,
        event_ids: [`${NOW}-1`],
        attempts: 2,
        error: "ThrottlingException: slow down",
      }),
    ]);
  });

  it("tries a request that failed as a whole again, and logs when it never succeeds", async () => {
    eventBridgeMock.on(PutEventsCommand).rejectsOnce(new Error("socket hang up")).resolves({ FailedEntryCount: 0 });
    const first = setup();
    await first.bus.publish([stored(0)], OWNER);
    expect(putCalls()).toHaveLength(2);
    expect(first.lines).toEqual([]);

    eventBridgeMock.reset();
    eventBridgeMock.on(PutEventsCommand).rejects(new Error("AccessDeniedException"));
    const second = setup();
    await expect(second.bus.publish([stored(0), stored(1)], OWNER)).resolves.toBeUndefined();
    expect(putCalls()).toHaveLength(3);
    expect(second.lines).toMatchObject([
      { level: "error", event_ids: [`${NOW}-0`, `${NOW}-1`], error: expect.stringContaining("AccessDeniedException") },
    ]);
  });

  describe("with a fallback queue", () => {
    it("sends what EventBridge still refuses to the queue found by its name, as the entry the dispatcher reads", async () => {
      refuseEventOne();
      sqsMock.on(GetQueueUrlCommand).resolves({ QueueUrl: FALLBACK_URL });
      sqsMock
        .on(SendMessageBatchCommand)
        .resolves({ Successful: [{ Id: "0", MessageId: "m", MD5OfMessageBody: "x" }] });
      const { bus, lines, waits } = setup({
        fallback: { sqs: sqs(), queue: { name: fallbackQueueNameFor(BUS) } },
      });
      const events = [stored(0, "a".repeat(MAX_ENTRY_BYTES)), stored(1, "b".repeat(MAX_ENTRY_BYTES))];
      await bus.publish(events, OWNER);
      await bus.publish([stored(1, "b".repeat(MAX_ENTRY_BYTES))], OWNER);

      // Three tries on the bus each time, then the queue; its URL is asked for once.
      expect(putCalls().map((input) => input.Entries?.length)).toEqual([2, 1, 1, 1, 1, 1]);
      expect(waits).toEqual([100, 400, 100, 400]);
      expect(sqsMock.commandCalls(GetQueueUrlCommand).map((call) => call.args[0].input)).toEqual([
        { QueueName: "sluice-dev-unpublished-events" },
      ]);
      const sent = sentToFallback();
      expect(sent).toHaveLength(2);
      expect(sent[0]?.QueueUrl).toBe(FALLBACK_URL);
      expect(sent[0]?.Entries?.map((entry) => entry.Id)).toEqual(["0"]);
      const message = JSON.parse(sent[0]?.Entries?.[0]?.MessageBody ?? "");
      expect(message).toEqual({
        source: "sluice.events",
        "detail-type": "event.stored",
        detail: { sourceId: SOURCE, owner: OWNER, eventId: `${NOW}-1`, channel: "" },
      });
      expect(dispatcherInputSchema.safeParse(message).success).toBe(true);
      expect(lines).toEqual([
        expect.objectContaining({
          level: "warn",
          message: expect.stringMatching(/queued for the dispatcher/),
          event_ids: [`${NOW}-1`],
        }),
        expect.objectContaining({ level: "warn", event_ids: [`${NOW}-1`] }),
      ]);
    });

    it("carries inline events whole, and tries again the messages SQS refused", async () => {
      eventBridgeMock.on(PutEventsCommand).rejects(new Error("ServiceUnavailable"));
      sqsMock
        .on(SendMessageBatchCommand)
        .resolvesOnce({ Successful: [], Failed: [{ Id: "0", Code: "InternalError", SenderFault: false }] })
        .resolves({ Successful: [{ Id: "0", MessageId: "m", MD5OfMessageBody: "x" }] });
      const { bus, lines } = setup({ fallback: { sqs: sqs(), queue: { url: FALLBACK_URL } } });
      const events = [stored(0), stored(1, "é")];
      await bus.publish(events, OWNER);
      expect(sqsMock.commandCalls(GetQueueUrlCommand)).toHaveLength(0);
      const sent = sentToFallback();
      expect(sent).toHaveLength(2);
      expect(JSON.parse(sent[1]?.Entries?.[0]?.MessageBody ?? "")).toEqual({
        source: "sluice.events",
        "detail-type": "event.stored",
        detail: JSON.parse(JSON.stringify({ sourceId: SOURCE, owner: OWNER, events })),
      });
      expect(lines).toEqual([expect.objectContaining({ level: "warn", event_ids: [`${NOW}-0`, `${NOW}-1`] })]);
    });

    it("logs an error naming the events when the queue refuses them too, and does not reject", async () => {
      refuseEventOne();
      sqsMock.on(GetQueueUrlCommand).rejectsOnce(new Error("AccessDenied")).resolves({ QueueUrl: FALLBACK_URL });
      sqsMock
        .on(SendMessageBatchCommand)
        .resolves({ Failed: [{ Id: "0", Code: "KMS.Throttled", SenderFault: false }] });
      const { bus, lines } = setup({ maxAttempts: 2, fallback: { sqs: sqs(), queue: { name: "q" } } });
      await expect(
        bus.publish([stored(0, "a".repeat(MAX_ENTRY_BYTES)), stored(1, "b".repeat(MAX_ENTRY_BYTES))], OWNER),
      ).resolves.toBeUndefined();
      // The failed look-up is made again by the next try.
      expect(sqsMock.commandCalls(GetQueueUrlCommand)).toHaveLength(2);
      expect(sentToFallback()).toHaveLength(1);
      expect(lines).toEqual([
        expect.objectContaining({
          level: "error",
          message: expect.stringMatching(/neither published on the event bus nor queued/),
          source_id: SOURCE,
          event_ids: [`${NOW}-1`],
          error: "ThrottlingException: slow down",
          fallback_error: "KMS.Throttled: ",
        }),
      ]);
    });
  });
});
