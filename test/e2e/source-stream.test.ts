import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { join } from "node:path";
import { EventSource, type FetchLike } from "eventsource";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadLocalConfig } from "#config/env";
import { createAccount } from "#core/accounts";
import { silentLogger } from "#core/ports/logger";
import { routes } from "#http/routes";
import { type LocalMode, localDeps } from "#local-mode/composition";
import { createLocalServer } from "#local-mode/server";
import type { SourceStreamServer } from "#local-mode/source-stream-server";
import { startLocalMode } from "#local-mode/start";
import { apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { newDataDir } from "../support/local-process.ts";
import { dataOf, openRawStream, type RawStream, type SseMessage } from "../support/sse-client.ts";

/**
 * The live stream of local mode end to end: a source deployed over the REST API emits what is
 * POSTed to its HTTP endpoint, through the real sandbox, and clients follow it over real HTTP, raw
 * and with the standard `eventsource` client. The server is composed in-process (as
 * `startLocalMode` does) so the keepalive can be shortened and a second account made.
 */
const STREAMING_SOURCE = `
export default {
  name: "Streamed",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) {
    const body = event.body ?? {};
    if (body.log) console.log(body.log);
    for (const item of body.emit ?? []) this.$emit(item.event, item.meta ?? {});
    if (body.big) {
      for (let i = 0; i < body.big.count; i++) this.$emit({ n: body.big.from + i, blob: "x".repeat(body.big.bytes) });
    }
    if (body.fail) throw new Error(body.fail);
  },
};
`;

const KEEPALIVE_MS = 300;

let local: LocalMode;
let server: Server;
let streams: SourceStreamServer;
let root: string;
let key: string;
let otherKey: string;
let api: ReturnType<typeof apiClient>;
const opened: { close(): void }[] = [];

beforeAll(async () => {
  const config = loadLocalConfig({ PORT: "0", SLUICE_DATA_DIR: newDataDir(), SLUICE_INVOCATION_TIMEOUT_MS: "10000" });
  local = await localDeps(config, silentLogger);
  key = (await createAccount(local.deps, { username: "streamer", email: "streamer@example.com" })).apiKey;
  otherKey = (await createAccount(local.deps, { username: "other", email: "other@example.com" })).apiKey;
  ({ server, streams } = createLocalServer(routes, local.deps, {
    bus: local.bus,
    stream: { keepaliveMs: KEEPALIVE_MS },
  }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  local.deps.runtime.publicUrl = root;
  api = apiClient(`${root}/v1`, key);
});

afterEach(() => {
  for (const client of opened.splice(0)) client.close();
});

afterAll(async () => {
  streams?.close();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await local?.close();
});

async function deploy(): Promise<{ id: string; endpoint: string }> {
  const deployed = await api("POST", "/sources", { component_code: STREAMING_SOURCE });
  expect(deployed.status).toBe(200);
  return { id: deployed.json.data.id, endpoint: deployed.json.data.configured_props.http.endpoint_url };
}

/** POSTs to the source's endpoint; the run (and its emits) follows the answer. */
async function trigger(endpoint: string, body: unknown): Promise<void> {
  const answer = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(answer.status).toBe(200);
  await answer.arrayBuffer();
}

const emitting = (...numbers: number[]) => ({ emit: numbers.map((n) => ({ event: { n } })) });

async function history(sourceId: string, query = ""): Promise<{ id: string; event: unknown }[]> {
  const page = await api("GET", `/sources/${sourceId}/event_summaries?expand=event${query}`);
  expect(page.status).toBe(200);
  return [...page.json.data].reverse();
}

async function stream(sourceId: string, query = "", headers: Record<string, string> = {}) {
  const opening = await openRawStream(`${root}/sources/${sourceId}/sse${query}`, {
    authorization: `Bearer ${key}`,
    ...headers,
  });
  opened.push(opening);
  return opening;
}

const numbersOf = (messages: SseMessage[]) => dataOf(messages).map((data) => data.event.n as number);

async function received(messages: SseMessage[], count: number, timeoutMs = 20_000) {
  await eventually(() => when(messages.length >= count), `${count} messages (have ${messages.length})`, { timeoutMs });
}

/** An EventSource that sends the API key, and whose current connection the test can cut. */
function eventSource(url: string) {
  const requests: (string | undefined)[] = [];
  let cut: (() => void) | undefined;
  let gate: Promise<void> = Promise.resolve();
  const fetchWithKey: FetchLike = async (target, init) => {
    requests.push(init.headers["Last-Event-ID"]);
    await gate;
    const response = await fetch(target, { ...init, headers: { ...init.headers, authorization: `Bearer ${key}` } });
    if (!response.body) return response;
    const reader = response.body.getReader();
    let done = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        cut = () => {
          if (done) return;
          done = true;
          controller.close();
          void reader.cancel().catch(() => {});
        };
      },
      async pull(controller) {
        const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }));
        if (done) return;
        if (chunk.done) {
          done = true;
          controller.close();
        } else controller.enqueue(chunk.value);
      },
      cancel: () => reader.cancel(),
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const source = new EventSource(url, { fetch: fetchWithKey });
  opened.push(source);
  return {
    source,
    /** The Last-Event-ID header of each connection attempt. */
    requests,
    /** Drops the current connection; the client reconnects once `reopen` resolves. */
    cut(reopen: Promise<void>) {
      gate = reopen;
      cut?.();
    },
  };
}

describe("GET /sources/{id}/sse against local mode", () => {
  it("streams a deployed source's emits in order, each with its event id, named channels as event names", async () => {
    const { id, endpoint } = await deploy();
    const client = await stream(id);
    expect(client.status).toBe(200);
    expect(client.headers["content-type"]).toMatch(/^text\/event-stream/);

    await trigger(endpoint, {
      emit: [
        { event: { n: 1 } },
        { event: { n: 2 }, meta: { name: "orders", summary: "order two" } },
        { event: { n: 3 } },
      ],
    });
    await received(client.messages, 3);
    await trigger(endpoint, emitting(4, 5));
    await received(client.messages, 5);

    const stored = await history(id);
    expect(client.messages.map((message) => message.id)).toEqual(stored.map((event) => event.id));
    expect(numbersOf(client.messages)).toEqual([1, 2, 3, 4, 5]);
    expect(client.messages.map((message) => message.event)).toEqual([
      undefined,
      "orders",
      undefined,
      undefined,
      undefined,
    ]);
    const [, second] = dataOf(client.messages);
    expect(second).toMatchObject({
      id: stored[1]?.id,
      event: { n: 2 },
      metadata: { emitter_id: id, name: "orders", summary: "order two" },
      k: "emit",
      e: { n: 2 },
      sum: "order two",
    });
  });

  it("streams console output on $logs and thrown errors on $errors, in the spec's error shape", async () => {
    const { id, endpoint } = await deploy();
    const logs = await stream(id, "?event_name=$logs");
    const errors = await stream(id, "?event_name=%24errors");
    const emits = await stream(id);

    await trigger(endpoint, { log: "hello from the run", emit: [{ event: { n: 1 } }] });
    await trigger(endpoint, { fail: "boom" });
    await received(logs.messages, 1);
    await received(errors.messages, 1);
    await received(emits.messages, 1);

    expect(logs.messages[0]?.event).toBe("$logs");
    expect(dataOf(logs.messages)[0].event).toMatchObject({ level: "log", message: "hello from the run" });
    expect(errors.messages[0]?.event).toBe("$errors");
    const error = dataOf(errors.messages)[0].event;
    expect(error).toMatchObject({
      original_event: { method: "POST", body: { fail: "boom" } },
      original_context: { deployment_id: id, source_type: "COMPONENT" },
      error: { code: "Error", cellId: "run", ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) },
    });
    expect(error.error.stack).toContain("boom");
    expect(numbersOf(emits.messages)).toEqual([1]);
    expect(emits.messages.map((message) => message.event)).toEqual([undefined]);
    // What was streamed is what the history holds on those channels.
    expect(logs.messages.map((message) => message.id)).toEqual(
      (await history(id, "&event_name=$logs")).map((e) => e.id),
    );
  });

  it("resumes with Last-Event-ID after a dropped connection and sends exactly the missed events", async () => {
    const { id, endpoint } = await deploy();
    const first = await stream(id);
    await trigger(endpoint, emitting(1, 2, 3));
    await received(first.messages, 3);
    first.close();
    await eventually(() => when(streams.clientCount(id) === 0), "the dropped client to leave");

    await trigger(endpoint, emitting(4, 5));
    await trigger(endpoint, emitting(6));
    await eventually(async () => when((await history(id)).length === 6), "the missed events to be stored");

    const resumed = await stream(id, "", { "last-event-id": first.messages.at(-1)?.id as string });
    await received(resumed.messages, 3);
    await trigger(endpoint, emitting(7));
    await received(resumed.messages, 4);
    expect(numbersOf(resumed.messages)).toEqual([4, 5, 6, 7]);
    const stored = await history(id);
    expect(resumed.messages.map((message) => message.id)).toEqual(stored.slice(3).map((event) => event.id));
  });

  it("works with the standard EventSource client: messages, named events, reconnection with Last-Event-ID", async () => {
    const { id, endpoint } = await deploy();
    const client = eventSource(`${root}/sources/${id}/sse`);
    const messages: MessageEvent[] = [];
    const orders: MessageEvent[] = [];
    client.source.onmessage = (message) => messages.push(message);
    client.source.addEventListener("orders", (message) => orders.push(message));
    await new Promise<void>((resolve) => client.source.addEventListener("open", () => resolve(), { once: true }));

    await trigger(endpoint, { emit: [{ event: { n: 1 } }, { event: { n: 2 }, meta: { name: "orders" } }] });
    await eventually(() => when(messages.length === 1 && orders.length === 1), "a message and an orders event");
    expect(JSON.parse(messages[0]?.data).event).toEqual({ n: 1 });
    expect(JSON.parse(orders[0]?.data).event).toEqual({ n: 2 });
    expect(orders[0]?.lastEventId).toBe(JSON.parse(orders[0]?.data).id);

    // Drop the connection, emit while it is down, then let the client reconnect on its own.
    let reopen!: () => void;
    client.cut(new Promise<void>((resolve) => (reopen = resolve)));
    await eventually(() => when(streams.clientCount(id) === 0), "the connection to drop");
    await trigger(endpoint, emitting(3, 4));
    await eventually(async () => when((await history(id)).length === 4), "the missed events to be stored");
    reopen();
    await eventually(() => when(messages.length === 3), "the missed events");
    await trigger(endpoint, emitting(5));
    await eventually(() => when(messages.length === 4), "a live event after the reconnection");
    expect(client.requests).toEqual([undefined, orders[0]?.lastEventId]);
    expect(messages.map((message) => JSON.parse(message.data).event.n)).toEqual([1, 3, 4, 5]);

    // A new EventSource cannot set headers on its first request: the query parameter does it.
    const late = eventSource(`${root}/sources/${id}/sse?last_event_id=${messages[1]?.lastEventId}`);
    const caughtUp: number[] = [];
    late.source.onmessage = (message) => caughtUp.push(JSON.parse(message.data).event.n);
    await eventually(() => when(caughtUp.length === 2), "the catch-up by query parameter");
    expect(caughtUp).toEqual([4, 5]);
  });

  it("gives several clients of one source every event, in order", async () => {
    const { id, endpoint } = await deploy();
    const raw = await Promise.all(Array.from({ length: 8 }, () => stream(id)));
    const standard = eventSource(`${root}/sources/${id}/sse`);
    const viaEventSource: number[] = [];
    standard.source.onmessage = (message) => viaEventSource.push(JSON.parse(message.data).event.n);
    await eventually(() => when(streams.clientCount(id) === 9), "nine clients");
    for (let run = 0; run < 4; run++) await trigger(endpoint, emitting(run * 3, run * 3 + 1, run * 3 + 2));
    const expected = Array.from({ length: 12 }, (_, n) => n);
    for (const client of raw) await received(client.messages, 12);
    await eventually(() => when(viaEventSource.length === 12), "the EventSource client");
    // Runs of one source may overlap, so the order is the history's (id order), checked here.
    const order = (await history(id)).map((event) => (event.event as { n: number }).n);
    expect([...order].sort((a, b) => a - b)).toEqual(expected);
    for (const client of raw) expect(numbersOf(client.messages)).toEqual(order);
    expect(viaEventSource).toEqual(order);
  });

  it("sends keepalive comments on an idle stream", async () => {
    const { id } = await deploy();
    const client = await stream(id);
    await eventually(
      () => when(client.comments.filter((comment) => comment === "keepalive").length >= 2),
      "keepalives",
    );
    expect(client.messages).toEqual([]);
  });

  it("disconnects a client that stops reading while another keeps receiving everything", async () => {
    const { id, endpoint } = await deploy();
    const reader = await stream(id);
    const stalled = connect((server.address() as AddressInfo).port, "127.0.0.1");
    try {
      stalled.write(`GET /sources/${id}/sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`);
      stalled.pause();
      await eventually(() => when(streams.clientCount(id) === 2), "both clients");
      // Each run emits 1 MB (2 MB of frames); kernel buffers hold a few MB before the bound applies.
      let sent = 0;
      for (let run = 0; run < 20 && streams.clientCount(id) === 2; run++) {
        await trigger(endpoint, { big: { from: sent, count: 10, bytes: 100_000 } });
        sent += 10;
        await received(reader.messages, sent);
      }
      expect(streams.clientCount(id)).toBe(1);
      await trigger(endpoint, emitting(sent));
      await received(reader.messages, sent + 1);
      expect(numbersOf(reader.messages)).toEqual(Array.from({ length: sent + 1 }, (_, n) => n));
    } finally {
      stalled.destroy();
    }
  });

  it("refuses other accounts, missing keys and bad resume ids before streaming", async () => {
    const { id } = await deploy();
    const other = await openRawStream(`${root}/sources/${id}/sse`, { authorization: `Bearer ${otherKey}` });
    const anonymous = await openRawStream(`${root}/sources/${id}/sse`);
    const badId = await openRawStream(`${root}/sources/${id}/sse`, {
      authorization: `Bearer ${key}`,
      "last-event-id": "0-x",
    });
    opened.push(other, anonymous, badId);
    expect([other.status, anonymous.status, badId.status]).toEqual([404, 401, 400]);
    await eventually(() => when(badId.ended()), "the 400 body");
    expect(JSON.parse(badId.text())).toMatchObject({ details: [{ field: "Last-Event-ID" }] });
    expect(streams.clientCount(id)).toBe(0);
    // The other account cannot tell this source from one that does not exist.
    const missing = await openRawStream(`${root}/sources/dc_missing/sse`, { authorization: `Bearer ${otherKey}` });
    opened.push(missing);
    await eventually(() => when(other.ended() && missing.ended()), "both 404 bodies");
    expect(other.text()).toBe(missing.text());
  });
});

describe("stopping local mode", () => {
  it("ends open streams so the server stops without waiting for them", async () => {
    const dataDir = newDataDir();
    const config = loadLocalConfig({ PORT: "0", SLUICE_DATA_DIR: dataDir });
    const running = await startLocalMode(config, silentLogger, () => {});
    const apiKey = readFileSync(join(dataDir, "api-key"), "utf8").trim();
    let client: RawStream | undefined;
    try {
      const deployed = await fetch(`${running.baseUrl}/sources`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ component_code: STREAMING_SOURCE }),
      });
      expect(deployed.status).toBe(200);
      const sourceId: string = ((await deployed.json()) as { data: { id: string } }).data.id;
      client = await openRawStream(`${running.baseUrl.replace(/\/v1$/, "")}/sources/${sourceId}/sse`, {
        authorization: `Bearer ${apiKey}`,
      });
      expect(client.status).toBe(200);
      await eventually(() => when(client?.text().includes(":ok") === true), "the opening frame");
    } finally {
      // A grace far beyond the test's timeout: the stop must not wait for the open stream.
      await running.stop(120_000);
    }
    await eventually(() => when(client?.ended() === true), "the stream to end");
  });
});
