import type { Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { silentLogger } from "#core/ports/logger";
import { deploySource } from "#core/sources";
import { routes } from "#http/routes";
import { createLocalServer } from "#local-mode/server";
import type { HttpResponseSpec } from "#runtime/protocol";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

/**
 * Item 7 of issue 12: a source's response headers never frame what goes on the wire. The scripted
 * component answers with whatever the request's body says (the local host normalises what a child
 * sends, the AWS host does not, and either could be wrong), and a raw socket reads the exact bytes
 * of two requests pipelined on one kept-alive connection: the first answer must end exactly where
 * the server says, so the second is read as the second.
 */
let server: Server;
let port: number;
let endpoint: string;

beforeAll(async () => {
  const { host } = scriptedHost(
    { props: [{ name: "http", type: "$.interface.http", customResponse: true }] },
    async (invocation, handlers) => {
      const response = (invocation.event as unknown as { body: HttpResponseSpec }).body;
      handlers?.onRespond?.(response);
      return { response };
    },
  );
  const deps = memoryDeps(Date.now(), { host, timers: { schedule: async () => {}, cancel: async () => {} } });
  const account = await accountIn(deps, "wire");
  const source = await deploySource(deps, { userId: account.user.id }, { component_code: "code" });
  endpoint = new URL(String((source.configured_props.http as { endpoint_url: string }).endpoint_url)).pathname;
  ({ server } = createLocalServer(routes, deps, { bus: new InProcessEventBus(silentLogger) }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Sends `raw` on one connection and collects every byte until the server closes it. */
function exchange(raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    socket.write(raw);
  });
}

const post = (response: unknown, close = false) => {
  const body = JSON.stringify(response);
  return `POST ${endpoint} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${close ? "connection: close\r\n" : ""}\r\n${body}`;
};
/** A second request on the connection, whose answer must be read whole after the first. */
const lastRequest = () => post({ status: 200, headers: { "x-second": "1" }, body: "second" }, true);

interface WireResponse {
  status: number;
  /** Every header line, names lower-cased, repeated names kept. */
  headers: [string, string][];
  body: string;
}

/** Reads one response off the front of `wire` the way a strict client would, and returns the rest. */
function readResponse(wire: string): { response: WireResponse; rest: string } {
  const headEnd = wire.indexOf("\r\n\r\n");
  expect(headEnd).toBeGreaterThan(0);
  const [statusLine = "", ...lines] = wire.slice(0, headEnd).split("\r\n");
  const headers = lines.map((line): [string, string] => [
    line.slice(0, line.indexOf(":")).toLowerCase(),
    line.slice(line.indexOf(":") + 1).trim(),
  ]);
  const status = Number(statusLine.split(" ")[1]);
  const lengths = headers.filter(([name]) => name === "content-length").map(([, value]) => Number(value));
  // Never both framings, never two lengths.
  expect(headers.filter(([name]) => name === "transfer-encoding")).toEqual([]);
  expect(lengths.length).toBeLessThanOrEqual(1);
  const length = lengths[0] ?? 0;
  const start = headEnd + 4;
  return {
    response: { status, headers, body: wire.slice(start, start + length) },
    rest: wire.slice(start + length),
  };
}

describe("a source's response on the wire", () => {
  it("carries one Content-Length set by the server, whatever framing headers the source set", async () => {
    const wire = await exchange(
      post({
        status: 200,
        headers: {
          "Transfer-Encoding": "chunked",
          "Content-Length": "1",
          "content-length": "999",
          Connection: "upgrade",
          Upgrade: "websocket",
          "x-kept": "yes",
        },
        body: "0\r\n\r\nHTTP/1.1 200 OK\r\nx-smuggled: 1\r\n\r\n",
      }) + lastRequest(),
    );
    const first = readResponse(wire);
    expect(first.response.status).toBe(200);
    expect(first.response.body).toBe("0\r\n\r\nHTTP/1.1 200 OK\r\nx-smuggled: 1\r\n\r\n");
    expect(first.response.headers).toContainEqual(["content-length", String(first.response.body.length)]);
    expect(first.response.headers).toContainEqual(["x-kept", "yes"]);
    expect(first.response.headers.map(([name]) => name)).not.toContain("upgrade");
    // The connection stayed in step: what follows is the answer to the second request, and only it.
    const second = readResponse(first.rest);
    expect(second.response).toMatchObject({ status: 200, body: "second" });
    expect(second.response.headers).toContainEqual(["x-second", "1"]);
    expect(second.rest).toBe("");
  });

  it("sends a 204 without a body or a length, and keeps the connection in step", async () => {
    const wire = await exchange(
      post({ status: 204, headers: { "content-length": "5" }, body: "12345" }) + lastRequest(),
    );
    const first = readResponse(wire);
    expect(first.response.status).toBe(204);
    expect(first.response.headers.map(([name]) => name)).not.toContain("content-length");
    expect(readResponse(first.rest).response.body).toBe("second");
  });

  it("never writes a header value that would split the response", async () => {
    const wire = await exchange(
      post({ status: 200, headers: { "x-split": "a\r\nx-injected: 1", "x-ok": "1" }, body: "b" }, true),
    );
    const { response } = readResponse(wire);
    expect(response.headers.map(([name]) => name)).not.toContain("x-injected");
    expect(response.headers.map(([name]) => name)).not.toContain("x-split");
    expect(response.body).toBe("b");
  });

  it("answers 502 instead of an interim (1xx) status as the final answer", async () => {
    const wire = await exchange(post({ status: 101, headers: { upgrade: "websocket" }, body: "" }) + lastRequest());
    const first = readResponse(wire);
    expect(first.response.status).toBe(502);
    expect(readResponse(first.rest).response.body).toBe("second");
  });
});
