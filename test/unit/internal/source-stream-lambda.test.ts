import { Writable } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { SourceRecord } from "#core/component-model";
import { SSE_HEADERS, SSE_OPENING_FRAME } from "#core/source-stream";
import type { Deps } from "#ports/deps";
import {
  createSourceStreamHandler,
  type ResponseMetadata,
  type ResponseStreamFactory,
  streamPathSourceId,
} from "../../../functions/stream/source-stream-lambda.ts";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";

const SOURCE = "dc_01kab00000abcdefghjkmn";

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A client: a Writable that records what it receives. */
function client(options: { stuck?: boolean } = {}) {
  const chunks: string[] = [];
  const out = new Writable({
    highWaterMark: options.stuck ? 1 : 16 * 1024,
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      // A stuck client takes the opening frame, then acknowledges nothing: every later write sees backpressure.
      if (!options.stuck || chunks.length === 1) callback();
    },
  });
  return { out, text: () => chunks.join("") };
}

interface Frame {
  id?: string;
  event?: string;
  data?: Record<string, any>;
  comment?: string;
}

function frames(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) => {
      const frame: Frame = {};
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) frame.comment = line.slice(1);
        else if (line.startsWith("id: ")) frame.id = line.slice(4);
        else if (line.startsWith("event: ")) frame.event = line.slice(7);
        else if (line.startsWith("data: ")) frame.data = JSON.parse(line.slice(6));
      }
      return frame;
    });
}

const eventFrames = (text: string) => frames(text).filter((frame) => frame.id !== undefined);

async function setup() {
  const deps = memoryDeps();
  const alice = await accountIn(deps, "alice");
  const bob = await accountIn(deps, "bob");
  const now = deps.clock.nowMs();
  const source: SourceRecord = {
    id: SOURCE,
    userId: alice.user.id,
    workspaceId: alice.workspace.id,
    componentId: "sc_01kab00000abcdefghjkmn",
    name: "feed",
    nameSlug: "feed",
    configuredProps: {},
    active: true,
    createdAt: now,
    updatedAt: now,
  };
  await deps.sources.createSource(source);
  let tick = 0;
  const emit = async (channel: string, ...values: number[]) => {
    deps.clock.set(deps.clock.nowMs() + 1);
    return deps.events.appendEvents(
      SOURCE,
      values.map((n) => ({ channel, event: { n }, emitId: `emit-${++tick}`, meta: {} })),
      deps.clock.nowMs(),
    );
  };
  return { deps, alice, bob, emit };
}

function handlerFor(
  deps: Deps,
  options: { keepaliveMs?: number; maxResponseBytes?: number; pollIntervalMs?: number } = {},
) {
  const responses: ResponseMetadata[] = [];
  const responseStream: ResponseStreamFactory = (stream, metadata) => {
    responses.push(metadata);
    return stream;
  };
  const handler = createSourceStreamHandler({
    loadDeps: async () => deps,
    settings: () => ({ pollIntervalMs: options.pollIntervalMs ?? 20, endMarginMs: 1_000 }),
    keepaliveMs: options.keepaliveMs ?? 60_000,
    maxResponseBytes: options.maxResponseBytes,
    responseStream,
  });
  return { handler, responses };
}

/** A context whose function times out `windowMs` from now. */
function contextFor(windowMs: number) {
  const end = Date.now() + windowMs;
  return { getRemainingTimeInMillis: () => end - Date.now(), awsRequestId: "req-1" };
}

function request(path: string, headers: Record<string, string> = {}, query = "", method = "GET") {
  return {
    version: "2.0",
    rawPath: path,
    rawQueryString: query,
    headers,
    requestContext: { requestId: "url-req-1", http: { method } },
  };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

describe("the Lambda entry", () => {
  afterEach(() => {
    delete (globalThis as { awslambda?: unknown }).awslambda;
    vi.resetModules();
  });

  it("is wrapped by awslambda.streamifyResponse in Lambda's runtime, and uses HttpResponseStream.from for status and headers", async () => {
    const streamified: unknown[] = [];
    const metadata: unknown[] = [];
    (globalThis as { awslambda?: unknown }).awslambda = {
      streamifyResponse: (inner: unknown) => {
        streamified.push(inner);
        return { streamified: inner };
      },
      HttpResponseStream: {
        from: (stream: Writable, meta: unknown) => {
          metadata.push(meta);
          return stream;
        },
      },
    };
    vi.resetModules();
    const entry = await import("../../../functions/stream/source-stream-lambda.ts");
    expect(entry.handler).toEqual({ streamified: entry.streamHandler });
    // A request refused before any store is built: no route.
    const { out, text } = client();
    await entry.streamHandler(request("/nowhere"), out, contextFor(5_000));
    expect(metadata).toMatchObject([
      { statusCode: 404, headers: { "content-type": "application/json; charset=utf-8" } },
    ]);
    expect(JSON.parse(text())).toEqual({ error: expect.stringContaining("/sources/{id}/sse") });
  });
});

describe("streamPathSourceId", () => {
  it("reads the id of /sources/{id}/sse and nothing else", () => {
    expect(streamPathSourceId(`/sources/${SOURCE}/sse`)).toBe(SOURCE);
    expect(streamPathSourceId(`//sources/${SOURCE}/sse/`)).toBe(SOURCE);
    expect(streamPathSourceId(`/v1/sources/${SOURCE}/sse`)).toBeUndefined();
    expect(streamPathSourceId(`/sources/${SOURCE}`)).toBeUndefined();
  });
});

describe("the stream function before streaming", () => {
  it("answers 401 with the error JSON and a Bearer challenge without a valid key", async () => {
    const { deps } = await setup();
    const { handler, responses } = handlerFor(deps);
    for (const headers of [{}, bearer("sluice_wrong")]) {
      const { out, text } = client();
      await handler(request(`/sources/${SOURCE}/sse`, headers), out, contextFor(5_000));
      expect(responses.at(-1)).toMatchObject({
        statusCode: 401,
        headers: { "www-authenticate": 'Bearer realm="sluice"', "x-request-id": "url-req-1" },
      });
      expect(JSON.parse(text())).toEqual({ error: expect.any(String) });
      expect(out.writableFinished).toBe(true);
    }
  });

  it("answers 404 for another account's source exactly as for a missing one", async () => {
    const { deps, bob } = await setup();
    const { handler, responses } = handlerFor(deps);
    const theirs = client();
    await handler(request(`/sources/${SOURCE}/sse`, bearer(bob.apiKey)), theirs.out, contextFor(5_000));
    const missing = client();
    await handler(
      request("/sources/dc_01kab00000zzzzzzzzzzzz/sse", bearer(bob.apiKey)),
      missing.out,
      contextFor(5_000),
    );
    expect(responses.map((response) => response.statusCode)).toEqual([404, 404]);
    expect(JSON.parse(theirs.text())).toEqual(JSON.parse(missing.text()));
  });

  it("answers 400 naming the field for a bad Last-Event-ID or a path id that is not a source's", async () => {
    const { deps, alice } = await setup();
    const { handler, responses } = handlerFor(deps);
    const badResume = client();
    await handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "yesterday" }),
      badResume.out,
      contextFor(5_000),
    );
    const badQuery = client();
    await handler(
      request(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "last_event_id=nope"),
      badQuery.out,
      contextFor(5_000),
    );
    const badId = client();
    await handler(request("/sources/p_123/sse", bearer(alice.apiKey)), badId.out, contextFor(5_000));
    expect(responses.map((response) => response.statusCode)).toEqual([400, 400, 400]);
    expect(JSON.parse(badResume.text()).details).toEqual([{ field: "Last-Event-ID", message: expect.any(String) }]);
    expect(JSON.parse(badQuery.text()).details).toEqual([{ field: "Last-Event-ID", message: expect.any(String) }]);
    expect(JSON.parse(badId.text()).details).toEqual([{ field: "id", message: expect.any(String) }]);
  });

  it("answers 404 for other paths and 405 with Allow for other methods", async () => {
    const { deps, alice } = await setup();
    const { handler, responses } = handlerFor(deps);
    await handler(request("/v1/users/me", bearer(alice.apiKey)), client().out, contextFor(5_000));
    await handler(request(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "", "POST"), client().out, contextFor(5_000));
    expect(responses).toMatchObject([{ statusCode: 404 }, { statusCode: 405, headers: { allow: "GET" } }]);
  });
});

describe("the stream function while streaming", () => {
  it("opens with the retry frame, resumes after Last-Event-ID, then sends new events of the default channels", async () => {
    const { deps, alice, emit } = await setup();
    const before = await emit("", 1, 2, 3);
    const { handler, responses } = handlerFor(deps);
    const { out, text } = client();
    const done = handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": before[0]!.id }),
      out,
      contextFor(60_000),
    );
    await until(() => eventFrames(text()).length === 2, "the history after Last-Event-ID");
    await emit("$logs", 99);
    await emit("", 4);
    await emit("alerts", 5);
    await until(() => eventFrames(text()).length === 4, "the live events");
    out.destroy();
    await done;

    expect(responses).toEqual([{ statusCode: 200, headers: { ...SSE_HEADERS, "x-request-id": "url-req-1" } }]);
    expect(text().startsWith(SSE_OPENING_FRAME)).toBe(true);
    const sent = eventFrames(text());
    expect(sent.map((frame) => frame.data?.event.n)).toEqual([2, 3, 4, 5]);
    expect(sent.map((frame) => frame.event)).toEqual([undefined, undefined, undefined, "alerts"]);
    expect(sent[0]).toMatchObject({ id: before[1]!.id, data: { id: before[1]!.id, k: "emit", e: { n: 2 } } });
  });

  it("without Last-Event-ID sends only events stored after it connected, of the channel event_name names", async () => {
    const { deps, alice, emit } = await setup();
    await emit("$logs", 1);
    const { handler } = handlerFor(deps);
    const { out, text } = client();
    const done = handler(
      request(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "event_name=%24logs"),
      out,
      contextFor(60_000),
    );
    await until(() => text().startsWith(SSE_OPENING_FRAME), "the opening frame");
    await emit("", 2);
    await emit("$logs", 3);
    await until(() => eventFrames(text()).length === 1, "the live log line");
    out.destroy();
    await done;
    expect(eventFrames(text())).toMatchObject([{ event: "$logs", data: { event: { n: 3 } } }]);
  });

  it("sends a keepalive comment when idle and ends cleanly before the function's time runs out", async () => {
    const { deps, alice } = await setup();
    const { handler } = handlerFor(deps, { keepaliveMs: 50 });
    const { out, text } = client();
    const context = contextFor(2_500);
    await handler(request(`/sources/${SOURCE}/sse`, bearer(alice.apiKey)), out, context);
    expect(out.writableFinished).toBe(true);
    expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
    expect(frames(text()).filter((frame) => frame.comment === "keepalive").length).toBeGreaterThan(0);
  });

  it("ends the response after the byte cap, and a reconnection with the last id gets the rest exactly once", async () => {
    const { deps, alice, emit } = await setup();
    const stored = await emit("", ...Array.from({ length: 30 }, (_, n) => n));
    const { handler } = handlerFor(deps, { maxResponseBytes: 2_000 });
    const first = client();
    await handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      first.out,
      contextFor(60_000),
    );
    const got = eventFrames(first.text());
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(30);
    const second = client();
    const done = handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": got.at(-1)!.id! }),
      second.out,
      contextFor(60_000),
    );
    await until(() => eventFrames(second.text()).length > 0, "the second response");
    second.out.destroy();
    await done;
    const all = [...got, ...eventFrames(second.text())];
    // The cap may end the second response too; what both carried is a prefix, in order, without repeats.
    expect(all.map((frame) => frame.id)).toEqual(stored.slice(0, all.length).map((event) => event.id));
  });

  it("reads nothing more from the store while a client does not drain, and still ends at the deadline", async () => {
    const { deps, alice, emit } = await setup();
    await emit("", 1, 2, 3);
    let reads = 0;
    const counting: Deps = {
      ...deps,
      events: new Proxy(deps.events, {
        get(target, member) {
          const value = Reflect.get(target, member) as unknown;
          if (member === "listEvents") reads++;
          return typeof value === "function" ? value.bind(target) : value;
        },
      }),
    };
    const { handler } = handlerFor(counting);
    const stuck = client({ stuck: true });
    await handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      stuck.out,
      contextFor(2_000),
    );
    // One read of the history; its first frame was never drained, so nothing more was read or written.
    expect(reads).toBe(1);
    expect(eventFrames(stuck.text()).map((frame) => frame.data?.event.n)).toEqual([1]);
  });

  it("ends the response, without an error frame, when the store fails mid-stream", async () => {
    const { deps, alice, emit } = await setup();
    await emit("", 1);
    let reads = 0;
    const failing: Deps = {
      ...deps,
      events: {
        appendEvents: deps.events.appendEvents.bind(deps.events),
        deleteEvents: deps.events.deleteEvents.bind(deps.events),
        deleteAllEvents: deps.events.deleteAllEvents.bind(deps.events),
        purgeDeletedEvents: deps.events.purgeDeletedEvents.bind(deps.events),
        listEvents: async (sourceId, query) => {
          if (++reads > 2) throw new Error("ProvisionedThroughputExceededException");
          return deps.events.listEvents(sourceId, query);
        },
      },
    };
    const { handler } = handlerFor(failing);
    const { out, text } = client();
    await handler(
      request(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      out,
      contextFor(60_000),
    );
    expect(out.writableFinished).toBe(true);
    expect(eventFrames(text()).map((frame) => frame.data?.event.n)).toEqual([1]);
  });
});
