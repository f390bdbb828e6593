import type { Server } from "node:http";
import { type AddressInfo, connect, Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import type { NewEvent, StoredEvent } from "#core/component-model";
import type { EventStore } from "#core/ports/event-store";
import { silentLogger } from "#core/ports/logger";
import { CATCH_UP_PAGE, SSE_KEEPALIVE_FRAME, SSE_OPENING_FRAME, sseFrame } from "#core/source-stream";
import { routes } from "#http/routes";
import { createLocalServer } from "#local-mode/server";
import type { SourceStreamServer } from "#local-mode/source-stream-server";
import { eventually, when } from "../../support/eventually.ts";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";
import { dataOf, openRawStream, type RawStream } from "../../support/sse-client.ts";

/**
 * The stream server of local mode on a real HTTP server, fed straight from the bus: events are
 * appended and published the way core's `storeAndPublish` does, so races (catch-up while events
 * arrive, slow clients) can be driven precisely. test/e2e/source-stream.test.ts covers the same
 * streams with events emitted by deployed sources.
 */
const KEEPALIVE_MS = 100;
const MAX_UNSENT_BYTES = 64 * 1024;

const deps = memoryDeps(Date.now());
const bus = new InProcessEventBus(silentLogger);
deps.bus = bus;

/** `listEvents` can be held, before or after it reads, to interleave live events with a catch-up. */
const realEvents = deps.events;
let hold: { promise: Promise<void>; release: () => void; readFirst: boolean } | undefined;
let listCalls = 0;
/**
 * When set, notes for each `listEvents` call after the first whether a `setImmediate` scheduled at
 * the call before had run by then: whether other work got a turn of the event loop between the two.
 */
let turnProbe: { turnBetween: boolean[]; ran: boolean | undefined } | undefined;
deps.events = new Proxy(realEvents, {
  get(target, member) {
    if (member === "listEvents") {
      return async (...args: Parameters<EventStore["listEvents"]>) => {
        listCalls++;
        const probe = turnProbe;
        if (probe) {
          if (probe.ran !== undefined) probe.turnBetween.push(probe.ran);
          probe.ran = false;
          setImmediate(() => (probe.ran = true));
        }
        const current = hold;
        if (!current) return target.listEvents(...args);
        if (current.readFirst) {
          const page = await target.listEvents(...args);
          await current.promise;
          return page;
        }
        await current.promise;
        return target.listEvents(...args);
      };
    }
    const value = Reflect.get(target, member);
    return typeof value === "function" ? value.bind(target) : value;
  },
});

function holdListEvents(readFirst: boolean) {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  hold = { promise, release, readFirst };
  return () => {
    hold = undefined;
    release();
  };
}

/** Opens a stream resuming after `afterId` whose history read is held (see holdListEvents) once it started. */
async function openHeldCatchUp(sourceId: string, afterId: string, readFirst: boolean) {
  const release = holdListEvents(readFirst);
  const callsBefore = listCalls;
  const stream = await open(`/sources/${sourceId}/sse`, { authorization: `Bearer ${key}`, "last-event-id": afterId });
  await eventually(() => when(listCalls > callsBefore), "the catch-up to start");
  return { stream, release };
}

let server: Server;
let streams: SourceStreamServer;
let root: string;
let owner: Awaited<ReturnType<typeof accountIn>>;
let key: string;
let otherKey: string;
let sourceCount = 0;
const opened: RawStream[] = [];

beforeAll(async () => {
  owner = await accountIn(deps, "owner");
  key = owner.apiKey;
  otherKey = (await accountIn(deps, "other")).apiKey;
  ({ server, streams } = createLocalServer(routes, deps, {
    bus,
    stream: { keepaliveMs: KEEPALIVE_MS, maxUnsentBytes: MAX_UNSENT_BYTES },
  }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  hold?.release();
  hold = undefined;
  for (const stream of opened.splice(0)) stream.close();
});

afterAll(async () => {
  streams.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function newSource(): Promise<string> {
  return (await deps.sources.createSource(sourceRecord(owner, `dc_stream${++sourceCount}`, Date.now()))).id;
}

/** Stores events and publishes them, as core does after a run. */
async function emit(sourceId: string, events: NewEvent[]): Promise<StoredEvent[]> {
  const stored = await realEvents.appendEvents(sourceId, events, Date.now());
  await bus.publish(stored);
  return stored;
}

const numbered = (from: number, count: number, channel = ""): NewEvent[] =>
  Array.from({ length: count }, (_, i) => ({ channel, event: { n: from + i }, emitId: `em_${from + i}`, meta: {} }));

async function open(path: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) {
  const stream = await openRawStream(`${root}${path}`, headers);
  opened.push(stream);
  return stream;
}

const numbersOf = (stream: RawStream) => dataOf(stream.messages).map((data) => data.event.n as number);

async function receivedCount(stream: RawStream, count: number) {
  await eventually(() => when(stream.messages.length >= count), `${count} messages`);
}

describe("GET /sources/{id}/sse in local mode", () => {
  it("answers errors before streaming exactly like the API", async () => {
    const sourceId = await newSource();
    const noKey = await open(`/sources/${sourceId}/sse`, {});
    await eventually(() => when(noKey.ended()), "the 401 body");
    expect(noKey.status).toBe(401);
    expect(noKey.headers["www-authenticate"]).toBe('Bearer realm="sluice"');
    expect(JSON.parse(noKey.text())).toEqual({ error: expect.any(String) });

    const queryKey = await open(`/sources/${sourceId}/sse?api_key=${key}`, {});
    expect(queryKey.status).toBe(401);

    const other = await open(`/sources/${sourceId}/sse`, { authorization: `Bearer ${otherKey}` });
    expect(other.status).toBe(404);
    const unknown = await open("/sources/dc_nothing/sse");
    expect(unknown.status).toBe(404);

    const badId = await open(`/sources/${sourceId}/sse`, { authorization: `Bearer ${key}`, "last-event-id": "nope" });
    await eventually(() => when(badId.ended()), "the 400 body");
    expect(badId.status).toBe(400);
    expect(JSON.parse(badId.text()).details).toEqual([{ field: "Last-Event-ID", message: expect.any(String) }]);
    const badQueryId = await open(`/sources/${sourceId}/sse?last_event_id=12`);
    expect(badQueryId.status).toBe(400);
    const badName = await open(`/sources/${sourceId}/sse?event_name=a%0Ab`);
    await eventually(() => when(badName.ended()), "the 400 body");
    expect(badName.status).toBe(400);
    expect(JSON.parse(badName.text()).details[0].field).toBe("event_name");

    const post = await openRawStream(`${root}/sources/${sourceId}/sse`, { authorization: `Bearer ${key}` }, "POST");
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe("GET");
    const versioned = await open(`/v1/sources/${sourceId}/sse`);
    expect(versioned.status).toBe(404);
    expect(streams.clientCount()).toBe(0);
  });

  it("opens with a retry delay, then sends each event with its id, channel name and envelope", async () => {
    const sourceId = await newSource();
    const stream = await open(`/sources/${sourceId}/sse`);
    expect(stream.status).toBe(200);
    expect(stream.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(stream.headers["cache-control"]).toBe("no-cache, no-transform");
    await eventually(() => when(stream.text().startsWith("retry: 1000\n:ok\n\n")), "the opening frame");

    const stored = await emit(sourceId, [
      { channel: "", event: { n: 1 }, emitId: "em_a", meta: { id: "a", summary: "first" } },
      { channel: "orders", event: { n: 2 }, emitId: "em_b", meta: {} },
      { channel: "$logs", event: { ts: 1, level: "log", message: "hidden" }, emitId: "em_c", meta: {} },
      { channel: "", event: { n: 3 }, emitId: "em_d", meta: {} },
    ]);
    await receivedCount(stream, 3);
    expect(stream.messages.map((m) => [m.id, m.event])).toEqual([
      [stored[0]?.id, undefined],
      [stored[1]?.id, "orders"],
      [stored[3]?.id, undefined],
    ]);
    expect(dataOf(stream.messages)[0]).toEqual({
      id: stored[0]?.id,
      indexed_at_ms: stored[0]?.indexedAtMs,
      event: { n: 1 },
      metadata: { emitter_id: sourceId, emit_id: "em_a", name: "", id: "a", summary: "first" },
      k: "emit",
      e: { n: 1 },
      ts: stored[0]?.indexedAtMs,
      sum: "first",
    });
  });

  it("selects one channel with event_name", async () => {
    const sourceId = await newSource();
    const logs = await open(`/sources/${sourceId}/sse?event_name=$logs`);
    const orders = await open(`/sources/${sourceId}/sse?event_name=orders`);
    const defaults = await open(`/sources/${sourceId}/sse?event_name=default`);
    await emit(sourceId, [...numbered(1, 1), ...numbered(2, 1, "$logs"), ...numbered(3, 1, "orders")]);
    await emit(sourceId, numbered(4, 1, "$errors"));
    await receivedCount(logs, 1);
    await receivedCount(orders, 1);
    await receivedCount(defaults, 1);
    await emit(sourceId, [...numbered(5, 1, "$logs"), ...numbered(6, 1)]);
    await receivedCount(logs, 2);
    await receivedCount(defaults, 2);
    expect([numbersOf(logs), numbersOf(orders), numbersOf(defaults)]).toEqual([[2, 5], [3], [1, 6]]);
    expect(logs.messages.every((message) => message.event === "$logs")).toBe(true);
  });

  it("resumes after Last-Event-ID with exactly the missed events, the header winning over the query", async () => {
    const sourceId = await newSource();
    const first = await open(`/sources/${sourceId}/sse`);
    const before = await emit(sourceId, numbered(1, 3));
    await receivedCount(first, 3);
    first.close();
    await eventually(() => when(streams.clientCount(sourceId) === 0), "the client to leave");
    await emit(sourceId, numbered(4, 2));

    const lastSeen = first.messages.at(-1)?.id as string;
    const resumed = await open(`/sources/${sourceId}/sse?last_event_id=${before[0]?.id}`, {
      authorization: `Bearer ${key}`,
      "last-event-id": lastSeen,
    });
    await receivedCount(resumed, 2);
    await emit(sourceId, numbered(6, 1));
    await receivedCount(resumed, 3);
    expect(numbersOf(resumed)).toEqual([4, 5, 6]);

    const byQuery = await open(`/sources/${sourceId}/sse?last_event_id=${lastSeen}`);
    await receivedCount(byQuery, 3);
    expect(numbersOf(byQuery)).toEqual([4, 5, 6]);
  });

  it.each([
    ["the history is read after the live events arrived", false],
    ["the history is read before the live events arrived", true],
  ])("sends each event once when %s", async (_case, readFirst) => {
    const sourceId = await newSource();
    const [first] = await emit(sourceId, numbered(1, 2));
    const { stream, release } = await openHeldCatchUp(sourceId, first!.id, readFirst);
    await emit(sourceId, numbered(3, 2));
    release();
    await receivedCount(stream, 3);
    await emit(sourceId, numbered(5, 1));
    await receivedCount(stream, 4);
    expect(numbersOf(stream)).toEqual([2, 3, 4, 5]);
    const ids = stream.messages.map((message) => message.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("gives every client of a source every event in order, through one bus subscription", async () => {
    const sourceId = await newSource();
    const clients = await Promise.all(Array.from({ length: 40 }, () => open(`/sources/${sourceId}/sse`)));
    expect(bus.listenerCount(sourceId)).toBe(1);
    for (let batch = 0; batch < 5; batch++) await emit(sourceId, numbered(batch * 10, 10));
    for (const client of clients) await receivedCount(client, 50);
    const expected = Array.from({ length: 50 }, (_, n) => n);
    for (const client of clients) expect(numbersOf(client)).toEqual(expected);
    for (const client of clients) client.close();
    await eventually(() => when(bus.listenerCount(sourceId) === 0), "the subscription to end");
    expect(streams.clientCount(sourceId)).toBe(0);
  });

  it("writes each event as one shared buffer to every client of a selection, the same bytes for all", async () => {
    const sourceId = await newSource();
    const all = await Promise.all(Array.from({ length: 6 }, () => open(`/sources/${sourceId}/sse`)));
    const orders = await Promise.all(
      Array.from({ length: 4 }, () => open(`/sources/${sourceId}/sse?event_name=orders`)),
    );
    const writes = vi.spyOn(Socket.prototype, "write");
    let chunks: unknown[];
    let stored: StoredEvent[];
    try {
      stored = await emit(sourceId, numbered(1, 1, "orders"));
      // A keepalive tick can fall in between on a loaded machine (the interval here is short).
      chunks = writes.mock.calls.map(([chunk]) => chunk).filter((chunk) => chunk !== SSE_KEEPALIVE_FRAME);
    } finally {
      writes.mockRestore();
    }
    const frame = sseFrame(stored[0]!);
    const framesWritten = chunks.filter((chunk) => Buffer.isBuffer(chunk) && chunk.toString() === frame);
    // One socket write per client and nothing else (no chunk framing), of one buffer per selection:
    // encoded once, not per client.
    expect(chunks).toHaveLength(10);
    expect(framesWritten).toHaveLength(10);
    expect(new Set(framesWritten).size).toBe(2);
    for (const client of [...all, ...orders]) await receivedCount(client, 1);
    for (const client of [...all, ...orders]) {
      expect(client.text().replaceAll(SSE_KEEPALIVE_FRAME, "")).toBe(SSE_OPENING_FRAME + frame);
    }
  });

  it("sends the stream without chunked encoding: the body is the frames, until the connection closes", async () => {
    const sourceId = await newSource();
    const socket = connect((server.address() as AddressInfo).port, "127.0.0.1");
    let raw = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (raw += chunk));
    try {
      socket.write(`GET /sources/${sourceId}/sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`);
      await eventually(() => when(raw.includes(SSE_OPENING_FRAME)), "the opening frame");
      const stored = await emit(sourceId, numbered(1, 2));
      const body = SSE_OPENING_FRAME + stored.map((event) => sseFrame(event)).join("");
      // Keepalives may come in between (the interval here is short); the rest is exactly the frames.
      const received = () => raw.split("\r\n\r\n")[1]?.replaceAll(SSE_KEEPALIVE_FRAME, "");
      await eventually(() => when(received() === body), "both frames");
      const head = raw.split("\r\n\r\n")[0];
      const headers = (head ?? "").toLowerCase().split("\r\n");
      expect(headers[0]).toBe("http/1.1 200 ok");
      expect(headers).toContain("connection: close");
      expect(headers.some((line) => line.startsWith("transfer-encoding:") || line.startsWith("content-length:"))).toBe(
        false,
      );
    } finally {
      socket.destroy();
    }
  });

  it("serves a stream pipelined behind another request on the same connection after that answer", async () => {
    const sourceId = await newSource();
    const socket = connect((server.address() as AddressInfo).port, "127.0.0.1");
    let raw = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (raw += chunk));
    try {
      const head = `HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`;
      // Both requests in one write: the stream's response does not own the socket until the first is answered.
      socket.write(`GET /v1/users/me ${head}GET /sources/${sourceId}/sse ${head}`);
      await eventually(() => when(raw.includes(SSE_OPENING_FRAME)), "the opening frame");
      const [stored] = await emit(sourceId, numbered(1, 1));
      const frame = sseFrame(stored!);
      await eventually(
        () => when(raw.replaceAll(SSE_KEEPALIVE_FRAME, "").endsWith(SSE_OPENING_FRAME + frame)),
        "the frame",
      );
      const streamStart = raw.lastIndexOf("HTTP/1.1 200");
      expect(raw.indexOf(`"username":"owner"`)).toBeGreaterThan(0);
      expect(raw.indexOf(`"username":"owner"`)).toBeLessThan(streamStart);
      expect(raw.slice(streamStart)).toContain("content-type: text/event-stream");
    } finally {
      socket.destroy();
    }
  });

  it("sends a keepalive comment when nothing else was sent for the interval", async () => {
    const sourceId = await newSource();
    const stream = await open(`/sources/${sourceId}/sse`);
    await eventually(() => when(stream.comments.includes("keepalive")), "a keepalive");
    expect(stream.messages).toEqual([]);
    expect(stream.text()).toContain("\n\n:keepalive\n\n");
  });

  it("disconnects a client that does not read, while the others keep receiving", async () => {
    const sourceId = await newSource();
    const reader = await open(`/sources/${sourceId}/sse`);
    const port = (server.address() as AddressInfo).port;
    const stalled = connect(port, "127.0.0.1");
    try {
      stalled.write(`GET /sources/${sourceId}/sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`);
      stalled.pause();
      await eventually(() => when(streams.clientCount(sourceId) === 2), "both clients");

      // Kernel buffers take a few MB before the server sees unsent bytes; 32 MB is far beyond them.
      const blob = "x".repeat(32 * 1024);
      let sent = 0;
      while (streams.clientCount(sourceId) === 2 && sent < 1_000) {
        await emit(sourceId, [{ channel: "", event: { n: sent, blob }, emitId: `em_${sent}`, meta: {} }]);
        sent++;
        await eventually(() => when(reader.messages.length >= sent), `message ${sent}`, { intervalMs: 1 });
      }
      expect(streams.clientCount(sourceId)).toBe(1);
      await emit(sourceId, numbered(sent, 1));
      await receivedCount(reader, sent + 1);
      expect(numbersOf(reader)).toEqual(Array.from({ length: sent + 1 }, (_, n) => n));
      expect(reader.ended()).toBe(false);
    } finally {
      stalled.destroy();
    }
  });

  it("reads the history it resumes from a page per turn of the event loop, so other requests are served meanwhile", async () => {
    const sourceId = await newSource();
    const events = numbered(0, 10 * CATCH_UP_PAGE + 1);
    for (let from = 0; from < events.length; from += 250) await emit(sourceId, events.slice(from, from + 250));
    const probe = { turnBetween: [] as boolean[], ran: undefined as boolean | undefined };
    turnProbe = probe;
    try {
      const resumed = await open(`/sources/${sourceId}/sse`, {
        authorization: `Bearer ${key}`,
        "last-event-id": "1-0",
      });
      await receivedCount(resumed, events.length);
      expect(numbersOf(resumed)).toEqual(events.map((_, n) => n));
    } finally {
      turnProbe = undefined;
    }
    expect(probe.turnBetween.length).toBeGreaterThanOrEqual(10);
    expect(probe.turnBetween.every(Boolean)).toBe(true);
  });

  it("disconnects a catching-up client when the live events kept for it pass the bound", async () => {
    const sourceId = await newSource();
    const [first] = await emit(sourceId, numbered(1, 1));
    const { stream, release } = await openHeldCatchUp(sourceId, first!.id, true);
    const blob = "x".repeat(16 * 1024);
    for (let n = 0; n < 5; n++) {
      await emit(sourceId, [{ channel: "", event: { n, blob }, emitId: `em_${n}`, meta: {} }]);
    }
    await eventually(() => when(stream.ended()), "the disconnection");
    expect(streams.clientCount(sourceId)).toBe(0);
    release();
  });

  it("ends the streams of a source deleted while they are open; a reconnection gets 404", async () => {
    const sourceId = await newSource();
    const kept = await newSource();
    const clients = await Promise.all([
      open(`/sources/${sourceId}/sse`),
      open(`/sources/${sourceId}/sse?event_name=$logs`),
    ]);
    const other = await open(`/sources/${kept}/sse`);
    await deps.sources.deleteSource(sourceId);
    await eventually(() => when(clients.every((client) => client.ended())), "the deleted source's streams to end");
    expect(streams.clientCount(sourceId)).toBe(0);
    expect(other.ended()).toBe(false);
    expect(streams.clientCount(kept)).toBe(1);
    const again = await fetch(`${root}/sources/${sourceId}/sse`, { headers: { authorization: `Bearer ${key}` } });
    expect(again.status).toBe(404);
  });

  it("ends every open stream when the server stops them", async () => {
    const sourceId = await newSource();
    const clients = await Promise.all([
      open(`/sources/${sourceId}/sse`),
      open(`/sources/${sourceId}/sse?event_name=$logs`),
    ]);
    const other = createLocalServer(routes, deps, { bus });
    await new Promise<void>((resolve) => other.server.listen(0, "127.0.0.1", resolve));
    const otherRoot = `http://127.0.0.1:${(other.server.address() as AddressInfo).port}`;
    const elsewhere = await openRawStream(`${otherRoot}/sources/${sourceId}/sse`, { authorization: `Bearer ${key}` });
    opened.push(elsewhere);
    expect(other.streams.clientCount()).toBe(1);

    other.streams.close();
    const closed = new Promise<void>((resolve) => other.server.close(() => resolve()));
    await eventually(() => when(elsewhere.ended()), "the stream to end");
    await closed;
    expect(other.streams.clientCount()).toBe(0);
    // Another server's streams are not affected.
    expect(clients.every((client) => !client.ended())).toBe(true);
    expect(streams.clientCount(sourceId)).toBe(2);
  });
});
