import { afterEach, describe, expect, it, vi } from "vitest";
import type { Deps } from "#core/ports/deps";
import { jsonLogger } from "#core/ports/logger";
import { SSE_HEADERS, SSE_OPENING_FRAME } from "#core/source-stream";
import {
  createSourceStreamHandler,
  type ResponseMetadata,
  type ResponseStreamFactory,
  streamPathSourceId,
  streamPathTarget,
} from "../../../functions/internal/source-stream-function.ts";
import { eventually, when } from "../../support/eventually.ts";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";
import { dataOf } from "../../support/sse-client.ts";
import {
  fakeLambdaRuntime,
  functionUrlRequest,
  lambdaContext,
  recordedResponse,
} from "../../support/stream-function.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

const SOURCE = "dc_01kab00000abcdefghjkmn";
const WORKFLOW = "p_01kab00000abcdefghjkmn";

async function setup() {
  const deps = memoryDeps();
  const alice = await accountIn(deps, "alice");
  const bob = await accountIn(deps, "bob");
  await deps.sources.createSource(sourceRecord(alice, SOURCE, deps.clock.nowMs()));
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

function handlerFor(deps: Deps, options: { keepaliveMs?: number; maxResponseBytes?: number } = {}) {
  const responses: ResponseMetadata[] = [];
  const responseStream: ResponseStreamFactory = (stream, metadata) => {
    responses.push(metadata);
    return stream;
  };
  const handler = createSourceStreamHandler({
    loadDeps: async () => deps,
    settings: () => ({ pollIntervalMs: 20, endMarginMs: 1_000 }),
    keepaliveMs: options.keepaliveMs ?? 60_000,
    maxResponseBytes: options.maxResponseBytes,
    responseStream,
  });
  return { handler, responses };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Opens the stream of `path`, runs `remove` once it is open, and expects the deletion, not the window, to end it. */
async function expectEndedByDeletion(deps: Deps, path: string, apiKey: string, remove: () => Promise<unknown>) {
  const { handler } = handlerFor(deps, { keepaliveMs: 50 });
  const { out, text } = recordedResponse();
  const context = lambdaContext(60_000);
  const done = handler(functionUrlRequest(path, bearer(apiKey)), out, context);
  await eventually(() => when(text().startsWith(SSE_OPENING_FRAME)), "the stream to open");
  await remove();
  await done;
  expect(out.writableFinished).toBe(true);
  expect(context.getRemainingTimeInMillis()).toBeGreaterThan(55_000);
}

describe("the Lambda entry", () => {
  let runtime: ReturnType<typeof fakeLambdaRuntime> | undefined;
  afterEach(() => {
    runtime?.remove();
    vi.resetModules();
  });

  it("is wrapped by awslambda.streamifyResponse in Lambda's runtime, and uses HttpResponseStream.from for status and headers", async () => {
    runtime = fakeLambdaRuntime((inner) => ({ streamified: inner }));
    vi.resetModules();
    const entry = await import("../../../functions/internal/source-stream-function.ts");
    expect(entry.handler).toEqual({ streamified: entry.streamHandler });
    // A request refused before any store is built: no route.
    const { out, text } = recordedResponse();
    await entry.streamHandler(functionUrlRequest("/nowhere"), out, lambdaContext(5_000));
    expect(runtime.metadata).toMatchObject([
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

describe("streamPathTarget", () => {
  it("tells a source's stream from a workflow's, and reads nothing else", () => {
    expect(streamPathTarget(`/sources/${SOURCE}/sse`)).toEqual({ kind: "source", id: SOURCE });
    expect(streamPathTarget(`/workflows/${WORKFLOW}/sse/`)).toEqual({ kind: "workflow", id: WORKFLOW });
    expect(streamPathSourceId(`/workflows/${WORKFLOW}/sse`)).toBeUndefined();
    expect(streamPathTarget(`/v1/workflows/${WORKFLOW}/sse`)).toBeUndefined();
    expect(streamPathTarget(`/workflows/${WORKFLOW}/sse/x`)).toBeUndefined();
  });
});

describe("the stream function before streaming", () => {
  it("answers 401 with the error JSON and a Bearer challenge without a valid key", async () => {
    const { deps } = await setup();
    const { handler, responses } = handlerFor(deps);
    for (const headers of [{}, bearer("sluice_wrong")]) {
      const { out, text } = recordedResponse();
      await handler(functionUrlRequest(`/sources/${SOURCE}/sse`, headers), out, lambdaContext(5_000));
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
    const theirs = recordedResponse();
    await handler(functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(bob.apiKey)), theirs.out, lambdaContext(5_000));
    const missing = recordedResponse();
    await handler(
      functionUrlRequest("/sources/dc_01kab00000zzzzzzzzzzzz/sse", bearer(bob.apiKey)),
      missing.out,
      lambdaContext(5_000),
    );
    expect(responses.map((response) => response.statusCode)).toEqual([404, 404]);
    expect(JSON.parse(theirs.text())).toEqual(JSON.parse(missing.text()));
  });

  it("answers 400 naming the field for a bad Last-Event-ID or a path id that is not a source's", async () => {
    const { deps, alice } = await setup();
    const { handler, responses } = handlerFor(deps);
    const badResume = recordedResponse();
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "yesterday" }),
      badResume.out,
      lambdaContext(5_000),
    );
    const badQuery = recordedResponse();
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "last_event_id=nope"),
      badQuery.out,
      lambdaContext(5_000),
    );
    const badId = recordedResponse();
    await handler(functionUrlRequest("/sources/p_123/sse", bearer(alice.apiKey)), badId.out, lambdaContext(5_000));
    expect(responses.map((response) => response.statusCode)).toEqual([400, 400, 400]);
    expect(JSON.parse(badResume.text()).details).toEqual([{ field: "Last-Event-ID", message: expect.any(String) }]);
    expect(JSON.parse(badQuery.text()).details).toEqual([{ field: "Last-Event-ID", message: expect.any(String) }]);
    expect(JSON.parse(badId.text()).details).toEqual([{ field: "id", message: expect.any(String) }]);
  });

  it("answers 404 for other paths and 405 with Allow for other methods", async () => {
    const { deps, alice } = await setup();
    const { handler, responses } = handlerFor(deps);
    await handler(
      functionUrlRequest("/v1/users/me", bearer(alice.apiKey)),
      recordedResponse().out,
      lambdaContext(5_000),
    );
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "", "POST"),
      recordedResponse().out,
      lambdaContext(5_000),
    );
    expect(responses).toMatchObject([{ statusCode: 404 }, { statusCode: 405, headers: { allow: "GET" } }]);
  });
});

describe("the stream function while streaming", () => {
  it("opens with the retry frame, resumes after Last-Event-ID, then sends new events of the default channels", async () => {
    const { deps, alice, emit } = await setup();
    const before = await emit("", 1, 2, 3);
    const { handler, responses } = handlerFor(deps);
    const { out, text, messages } = recordedResponse();
    const done = handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": before[0]!.id }),
      out,
      lambdaContext(60_000),
    );
    await eventually(() => when(messages.length === 2), "the history after Last-Event-ID");
    await emit("$logs", 99);
    await emit("", 4);
    await emit("alerts", 5);
    await eventually(() => when(messages.length === 4), "the live events");
    out.destroy();
    await done;

    expect(responses).toEqual([{ statusCode: 200, headers: { ...SSE_HEADERS, "x-request-id": "url-req-1" } }]);
    expect(text().startsWith(SSE_OPENING_FRAME)).toBe(true);
    expect(dataOf(messages).map((data) => data.event.n)).toEqual([2, 3, 4, 5]);
    expect(messages.map((message) => message.event)).toEqual([undefined, undefined, undefined, "alerts"]);
    expect(messages[0]?.id).toBe(before[1]!.id);
    expect(dataOf(messages)[0]).toMatchObject({ id: before[1]!.id, k: "emit", e: { n: 2 } });
  });

  it("without Last-Event-ID sends only events stored after it connected, of the channel event_name names", async () => {
    const { deps, alice, emit } = await setup();
    await emit("$logs", 1);
    const { handler } = handlerFor(deps);
    const { out, text, messages } = recordedResponse();
    const done = handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "event_name=%24logs"),
      out,
      lambdaContext(60_000),
    );
    await eventually(() => when(text().startsWith(SSE_OPENING_FRAME)), "the opening frame");
    await emit("", 2);
    await emit("$logs", 3);
    await eventually(() => when(messages.length === 1), "the live log line");
    out.destroy();
    await done;
    expect(messages.map((message) => message.event)).toEqual(["$logs"]);
    expect(dataOf(messages)).toMatchObject([{ event: { n: 3 } }]);
  });

  it("sends a keepalive comment when idle and ends cleanly before the function's time runs out", async () => {
    const { deps, alice } = await setup();
    const { handler } = handlerFor(deps, { keepaliveMs: 50 });
    const { out, comments } = recordedResponse();
    const context = lambdaContext(2_500);
    await handler(functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(alice.apiKey)), out, context);
    expect(out.writableFinished).toBe(true);
    expect(context.getRemainingTimeInMillis()).toBeGreaterThan(0);
    expect(comments).toContain("keepalive");
  });

  it("ends the response within a keepalive interval once its source is deleted, long before its window ends", async () => {
    const { deps, alice } = await setup();
    await expectEndedByDeletion(deps, `/sources/${SOURCE}/sse`, alice.apiKey, () => deps.sources.deleteSource(SOURCE));
  });

  it("ends the response after the byte cap, and a reconnection with the last id gets the rest exactly once", async () => {
    const { deps, alice, emit } = await setup();
    const stored = await emit("", ...Array.from({ length: 30 }, (_, n) => n));
    const { handler } = handlerFor(deps, { maxResponseBytes: 2_000 });
    const first = recordedResponse();
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      first.out,
      lambdaContext(60_000),
    );
    const got = first.messages;
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(30);
    const second = recordedResponse();
    const done = handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": got.at(-1)!.id! }),
      second.out,
      lambdaContext(60_000),
    );
    await eventually(() => when(second.messages.length > 0), "the second response");
    second.out.destroy();
    await done;
    const all = [...got, ...second.messages];
    // The cap may end the second response too; what both carried is a prefix, in order, without repeats.
    expect(all.map((message) => message.id)).toEqual(stored.slice(0, all.length).map((event) => event.id));
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
    const stuck = recordedResponse({ stuck: true });
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      stuck.out,
      lambdaContext(2_000),
    );
    // One read of the history; its first frame was never drained, so nothing more was read or written.
    expect(reads).toBe(1);
    expect(dataOf(stuck.messages).map((data) => data.event.n)).toEqual([1]);
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
    const { out, messages } = recordedResponse();
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, { ...bearer(alice.apiKey), "last-event-id": "0-0" }),
      out,
      lambdaContext(60_000),
    );
    expect(out.writableFinished).toBe(true);
    expect(dataOf(messages).map((data) => data.event.n)).toEqual([1]);
  });
});

describe("the stream function's request line", () => {
  it("is written when the response ends, refused or streamed, with the path and never the query or the key", async () => {
    const { deps, alice } = await setup();
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const { handler } = handlerFor(deps);
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, bearer("not-a-key-0123456789")),
      recordedResponse().out,
      lambdaContext(5_000),
    );
    // A window of 200 ms: the stream ends by itself.
    await handler(
      functionUrlRequest(`/sources/${SOURCE}/sse`, bearer(alice.apiKey), "event_name=query-secret"),
      recordedResponse().out,
      lambdaContext(1_200),
    );
    const requests = lines.filter((line) => line.message === "request");
    expect(requests).toEqual([
      expect.objectContaining({ method: "GET", path: `/sources/${SOURCE}/sse`, status: 401 }),
      expect.objectContaining({ method: "GET", path: `/sources/${SOURCE}/sse`, status: 200 }),
    ]);
    expect(requests[1]).not.toHaveProperty("aborted");
    for (const hidden of ["query-secret", alice.apiKey, "not-a-key-0123456789"]) {
      expect(JSON.stringify(lines)).not.toContain(hidden);
    }
  });
});

describe("a workflow's stream on AWS (/workflows/{id}/sse)", () => {
  async function workflowSetup() {
    const { deps, alice, bob } = await setup();
    await deps.workflows.createWorkflow(workflowRecord(alice, WORKFLOW, deps.clock.nowMs()));
    let tick = 0;
    /** Events as a run's `$.send.sse` and `$.send.emit` store them (workflow-runs.ts). */
    const send = async (channel: string, ...values: number[]) => {
      deps.clock.set(deps.clock.nowMs() + 1);
      return deps.events.appendEvents(
        WORKFLOW,
        values.map((n) => ({ channel: "$sse", event: { n }, emitId: `sse-${++tick}`, meta: { name: channel } })),
        deps.clock.nowMs(),
      );
    };
    const emit = async (n: number) =>
      deps.events.appendEvents(
        WORKFLOW,
        [{ channel: "", event: { raw_event: n }, emitId: `emit-${++tick}`, meta: {} }],
        deps.clock.nowMs(),
      );
    return { deps, alice, bob, send, emit };
  }

  it("replays the newest 100 sends, then the live ones, each named by its channel; emits are not in it", async () => {
    const { deps, alice, send, emit } = await workflowSetup();
    await send("old", ...Array.from({ length: 102 }, (_, i) => i));
    const { handler } = handlerFor(deps);
    const { out, messages } = recordedResponse();
    const done = handler(
      functionUrlRequest(`/workflows/${WORKFLOW}/sse`, bearer(alice.apiKey)),
      out,
      lambdaContext(60_000),
    );
    await eventually(() => when(messages.length === 100), "the newest 100 sends");
    await emit(7);
    await send("orders", 500);
    await eventually(() => when(messages.length === 101), "the live send");
    out.destroy();
    await done;
    expect(dataOf(messages).map((data) => data.event.n)).toEqual([
      ...Array.from({ length: 100 }, (_, i) => i + 2),
      500,
    ]);
    expect(messages.at(0)?.event).toBe("old");
    expect(messages.at(-1)?.event).toBe("orders");
    expect(dataOf(messages).at(-1)).toMatchObject({ e: { n: 500 }, metadata: { emitter_id: WORKFLOW } });
  });

  it("ends the response once its workflow is deleted", async () => {
    const { deps, alice } = await workflowSetup();
    const remove = () => deps.workflows.deleteWorkflow(WORKFLOW);
    await expectEndedByDeletion(deps, `/workflows/${WORKFLOW}/sse`, alice.apiKey, remove);
  });

  it("resumes after Last-Event-ID instead of replaying", async () => {
    const { deps, alice, send } = await workflowSetup();
    const sent = await send("c", 1, 2, 3);
    const { handler } = handlerFor(deps);
    const { out, messages } = recordedResponse();
    const done = handler(
      functionUrlRequest(`/workflows/${WORKFLOW}/sse`, { ...bearer(alice.apiKey), "last-event-id": sent[1]!.id }),
      out,
      lambdaContext(60_000),
    );
    await eventually(() => when(messages.length === 1), "the send after Last-Event-ID");
    out.destroy();
    await done;
    expect(dataOf(messages).map((data) => data.event.n)).toEqual([3]);
  });

  it("answers 404 for another account's workflow as for a missing one, and 400 for an id that is not a workflow's", async () => {
    const { deps, alice, bob } = await workflowSetup();
    const { handler, responses } = handlerFor(deps);
    const theirs = recordedResponse();
    await handler(
      functionUrlRequest(`/workflows/${WORKFLOW}/sse`, bearer(bob.apiKey)),
      theirs.out,
      lambdaContext(5_000),
    );
    const missing = recordedResponse();
    await handler(
      functionUrlRequest("/workflows/p_01kab00000zzzzzzzzzzzz/sse", bearer(bob.apiKey)),
      missing.out,
      lambdaContext(5_000),
    );
    const badId = recordedResponse();
    await handler(
      functionUrlRequest(`/workflows/${SOURCE}/sse`, bearer(alice.apiKey)),
      badId.out,
      lambdaContext(5_000),
    );
    expect(responses.map((response) => response.statusCode)).toEqual([404, 404, 400]);
    expect(JSON.parse(theirs.text())).toEqual(JSON.parse(missing.text()));
    expect(JSON.parse(badId.text()).details).toEqual([{ field: "workflow_id", message: expect.any(String) }]);
  });
});
