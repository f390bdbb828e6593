import { describe, expect, it } from "vitest";
import type { NewEvent, StoredEvent } from "#core/component-model";
import { sseEnvelope } from "#core/event-views";
import type { EventQuery, EventStore } from "#core/ports/event-store";
import {
  CATCH_UP_PAGE,
  eventsAfter,
  openSourceStream,
  SSE_KEEPALIVE_FRAME,
  SSE_OPENING_FRAME,
  sseFrame,
  streamCarries,
} from "#core/source-stream";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";

const NOW = Date.UTC(2026, 10, 20, 12);

function stored(overrides: Partial<StoredEvent> = {}): StoredEvent {
  return {
    sourceId: "dc_one",
    id: `${NOW}-0`,
    indexedAtMs: NOW,
    channel: "",
    event: { hello: "world" },
    emitId: "em_1",
    meta: {},
    ...overrides,
  };
}

/** The fields of an SSE message, as an EventSource parses them. */
function parseFrame(frame: string): Record<string, string> {
  expect(frame.endsWith("\n\n")).toBe(true);
  const fields: Record<string, string> = {};
  for (const line of frame.slice(0, -2).split("\n")) {
    const colon = line.indexOf(":");
    fields[line.slice(0, colon)] = line.slice(colon + 2);
  }
  return fields;
}

async function setUp() {
  const deps = memoryDeps(NOW);
  const owner = await accountIn(deps, "owner");
  const other = await accountIn(deps, "other");
  const source = await deps.sources.createSource(sourceRecord(owner, "dc_streamed", NOW));
  return { deps, source, owner: { userId: owner.user.id }, other: { userId: other.user.id } };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

const newEvent = (n: number, channel = ""): NewEvent => ({ channel, event: { n }, emitId: `em_${n}`, meta: {} });

describe("source stream frames", () => {
  it("frames a default-channel event as an unnamed message whose id is the event id", () => {
    const frame = sseFrame(stored({ id: "1700000000000-3" }));
    expect(frame.startsWith("id: 1700000000000-3\ndata: ")).toBe(true);
    expect(frame).not.toContain("\nevent:");
    const fields = parseFrame(frame);
    expect(Object.keys(fields)).toEqual(["id", "data"]);
    expect(JSON.parse(fields.data as string).event).toEqual({ hello: "world" });
  });

  it("names the message after a custom channel, $logs or $errors", () => {
    for (const channel of ["orders", "$logs", "$errors"]) {
      expect(parseFrame(sseFrame(stored({ channel }))).event).toBe(channel);
    }
  });

  it("names a workflow's send after its $.send.sse channel in both event: and the envelope, a source's after its channel", () => {
    const send = stored({ sourceId: "p_flow", channel: "$sse", meta: { name: "orders" } });
    const workflowFields = parseFrame(sseFrame(send, { names: "send" }));
    expect(workflowFields.event).toBe("orders");
    expect(JSON.parse(workflowFields.data as string).metadata.name).toBe("orders");
    // A source's stream names by the stored channel, whatever `meta.name` holds.
    const sourceFields = parseFrame(sseFrame({ ...send, sourceId: "dc_one", channel: "updates" }));
    expect(sourceFields.event).toBe("updates");
    expect(JSON.parse(sourceFields.data as string).metadata.name).toBe("updates");
    expect(JSON.parse(parseFrame(sseFrame(stored())).data as string).metadata.name).toBe("");
  });

  it("keeps the data on one line even when the event holds line breaks", () => {
    const frame = sseFrame(stored({ event: { text: "a\nb\r\nc" } }));
    expect(frame.split("\n").filter((line) => line.startsWith("data: "))).toHaveLength(1);
    expect(JSON.parse(parseFrame(frame).data as string).e).toEqual({ text: "a\nb\r\nc" });
  });

  it("carries the event summary with full data and the original's emit record", () => {
    const big = { blob: "x".repeat(5_000) };
    const envelope = sseEnvelope(
      stored({ id: `${NOW}-7`, channel: "orders", event: big, meta: { id: 42, summary: "order 42", ts: NOW - 5 } }),
    );
    expect(envelope).toEqual({
      id: `${NOW}-7`,
      indexed_at_ms: NOW,
      event: big,
      metadata: { emitter_id: "dc_one", emit_id: "em_1", name: "orders", id: 42, summary: "order 42", ts: NOW - 5 },
      k: "emit",
      e: big,
      ts: NOW,
      sum: "order 42",
    });
    expect(sseEnvelope(stored())).not.toHaveProperty("sum");
  });

  it("opens with a retry delay and uses comments for keepalives", () => {
    expect(SSE_OPENING_FRAME).toMatch(/^retry: \d+\n/);
    expect(SSE_OPENING_FRAME.endsWith("\n\n")).toBe(true);
    expect(SSE_KEEPALIVE_FRAME.startsWith(":")).toBe(true);
    expect(SSE_KEEPALIVE_FRAME.endsWith("\n\n")).toBe(true);
  });
});

describe("streamCarries", () => {
  const all = { sourceId: "dc_one", channel: undefined };

  it("carries every channel not starting with $ when no channel is selected", () => {
    expect(streamCarries(all, stored({ channel: "" }))).toBe(true);
    expect(streamCarries(all, stored({ channel: "orders" }))).toBe(true);
    expect(streamCarries(all, stored({ channel: "$logs" }))).toBe(false);
    expect(streamCarries(all, stored({ channel: "$errors" }))).toBe(false);
  });

  it("carries exactly the selected channel", () => {
    const logs = { sourceId: "dc_one", channel: "$logs" };
    expect(streamCarries(logs, stored({ channel: "$logs" }))).toBe(true);
    expect(streamCarries(logs, stored({ channel: "$errors" }))).toBe(false);
    expect(streamCarries(logs, stored({ channel: "" }))).toBe(false);
    const defaultOnly = { sourceId: "dc_one", channel: "" };
    expect(streamCarries(defaultOnly, stored({ channel: "" }))).toBe(true);
    expect(streamCarries(defaultOnly, stored({ channel: "orders" }))).toBe(false);
  });

  it("never carries another source's events", () => {
    expect(streamCarries(all, stored({ sourceId: "dc_two" }))).toBe(false);
  });
});

describe("openSourceStream", () => {
  it("opens the caller's source, live or resuming after an event id", async () => {
    const { deps, source, owner } = await setUp();
    expect(await openSourceStream(deps, owner, source.id, {})).toEqual({
      sourceId: source.id,
      channel: undefined,
      resumeAfter: undefined,
    });
    const resumed = await openSourceStream(deps, owner, source.id, { lastEventId: ` ${NOW}-4 ` });
    expect(resumed.resumeAfter).toBe(`${NOW}-4`);
    expect((await openSourceStream(deps, owner, source.id, { lastEventId: "  " })).resumeAfter).toBeUndefined();
    // The query parameter is for a first connection; a header (a reconnection) wins over it.
    const resumeAfter = async (input: { lastEventId?: string; last_event_id?: string }) =>
      (await openSourceStream(deps, owner, source.id, input)).resumeAfter;
    expect(await resumeAfter({ last_event_id: `${NOW}-1` })).toBe(`${NOW}-1`);
    expect(await resumeAfter({ lastEventId: `${NOW}-2`, last_event_id: `${NOW}-1` })).toBe(`${NOW}-2`);
    expect(await resumeAfter({ lastEventId: "", last_event_id: `${NOW}-1` })).toBe(`${NOW}-1`);
  });

  it("selects one channel by event_name, `default` and an empty name meaning the default channel", async () => {
    const { deps, source, owner } = await setUp();
    const channelOf = async (event_name: string) =>
      (await openSourceStream(deps, owner, source.id, { event_name })).channel;
    expect(await channelOf("$logs")).toBe("$logs");
    expect(await channelOf("orders")).toBe("orders");
    expect(await channelOf("default")).toBe("");
    expect(await channelOf("")).toBe("");
  });

  it("answers 400 naming the field for a bad Last-Event-ID or event_name", async () => {
    const { deps, source, owner } = await setUp();
    const invalid = (field: string) => ({ code: "validation", issues: [{ field, message: expect.any(String) }] });
    await expect(openSourceStream(deps, owner, source.id, { lastEventId: "yesterday" })).rejects.toMatchObject(
      invalid("Last-Event-ID"),
    );
    await expect(openSourceStream(deps, owner, source.id, { event_name: "x".repeat(129) })).rejects.toMatchObject(
      invalid("event_name"),
    );
    await expect(openSourceStream(deps, owner, source.id, { event_name: "a\nb" })).rejects.toMatchObject(
      invalid("event_name"),
    );
  });

  it("answers not found for an unknown source and for another account's source", async () => {
    const { deps, source, other, owner } = await setUp();
    await expect(openSourceStream(deps, owner, "dc_missing", {})).rejects.toMatchObject({ code: "not_found" });
    await expect(openSourceStream(deps, other, source.id, {})).rejects.toMatchObject({ code: "not_found" });
  });
});

describe("eventsAfter", () => {
  it("pages through more than one page of history, oldest first, strictly after the id", async () => {
    const { deps, source } = await setUp();
    const count = CATCH_UP_PAGE * 2 + 50;
    // One append in one ms: ids run `<ms>-0` to `<ms>-249`, whose string order differs from their order.
    const events = await deps.events.appendEvents(
      source.id,
      Array.from({ length: count }, (_, n) => newEvent(n)),
      NOW,
    );
    const stream = { sourceId: source.id, channel: undefined };
    const counted: boolean[] = [];
    const reading = {
      events: {
        listEvents: (sourceId: string, query: EventQuery) => {
          counted.push(query.count !== false);
          return deps.events.listEvents(sourceId, query);
        },
      } as EventStore,
    };
    const after9 = await collect(eventsAfter(reading, stream, events[9]?.id as string));
    expect(after9.map((event) => event.event)).toEqual(Array.from({ length: count - 10 }, (_, i) => ({ n: i + 10 })));
    // 240 events: two full pages and a last one, none of them counted.
    expect(counted).toEqual([false, false, false]);
    expect(await collect(eventsAfter(deps, stream, events[count - 1]?.id as string))).toEqual([]);
    const fromBefore = await collect(eventsAfter(deps, stream, `${NOW - 1}-0`));
    expect(fromBefore).toHaveLength(count);
  });

  it("reads only the stream's channels", async () => {
    const { deps, source } = await setUp();
    const events = await deps.events.appendEvents(
      source.id,
      [newEvent(0), newEvent(1, "$logs"), newEvent(2, "orders"), newEvent(3, "$errors"), newEvent(4)],
      NOW,
    );
    const first = events[0]?.id as string;
    const numbers = async (channel: string | undefined) =>
      (await collect(eventsAfter(deps, { sourceId: source.id, channel }, first))).map((event) => event.event);
    expect(await numbers(undefined)).toEqual([{ n: 2 }, { n: 4 }]);
    expect(await numbers("$logs")).toEqual([{ n: 1 }]);
    expect(await numbers("$errors")).toEqual([{ n: 3 }]);
    expect(await numbers("")).toEqual([{ n: 4 }]);
  });
});
