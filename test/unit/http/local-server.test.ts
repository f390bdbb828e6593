import { Agent, request as httpRequest, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { silentLogger } from "#core/ports/logger";
import { routes } from "#http/routes";
import { serverMaxConnections } from "#local-mode/connection-cap";
import { createLocalServer, malformedRequestResult, refusedRequestIsHead, requestUrl } from "#local-mode/server";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";

/**
 * Requests local mode's server must refuse in the API's error shape, including those Node's HTTP
 * parser refuses before any handler runs (found by test/e2e/fault-bad-input.test.ts).
 */
let server: Server;
let port: number;
let key: string;

beforeAll(async () => {
  const deps = memoryDeps(Date.now());
  key = (await accountIn(deps, "ada")).apiKey;
  ({ server } = createLocalServer(routes, deps, { bus: new InProcessEventBus(silentLogger) }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

it("caps its open connections below its open-files limit (connection-cap.ts)", () => {
  expect(server.maxConnections).toBe(serverMaxConnections());
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends bytes as they are (no client would send these) and reads the answer until the server closes. */
function rawRequest(text: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const [head = "", ...rest] = raw.split("\r\n\r\n");
      const [statusLine = "", ...lines] = head.split("\r\n");
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]),
      );
      const body = rest.join("\r\n\r\n");
      const chunked = headers["transfer-encoding"] === "chunked";
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: chunked ? dechunk(body) : body });
    });
    socket.end(text);
  });
}

function dechunk(text: string): string {
  let out = "";
  let rest = text;
  for (;;) {
    const end = rest.indexOf("\r\n");
    const size = Number.parseInt(rest.slice(0, end), 16);
    if (!(size > 0)) return out;
    out += rest.slice(end + 2, end + 2 + size);
    rest = rest.slice(end + 2 + size + 2);
  }
}

const request = (target: string, method = "GET") =>
  `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`;

describe("the local server on requests Node's parser refuses", () => {
  it("answers headers over Node's limit with 431 in the error shape and a request id", async () => {
    const answer = await rawRequest(request(`/v1/users/me?pad=${"x".repeat(20_000)}`));
    expect(answer.status).toBe(431);
    expect(answer.headers["content-type"]).toMatch(/^application\/json/);
    expect(answer.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining("too large") });
  });

  it("answers raw non-ASCII bytes in the path with 400 in the error shape", async () => {
    const answer = await rawRequest(Buffer.from(request("/v1/sources/\u00ff\u00fe"), "latin1"));
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toMatch(/^application\/json/);
    expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining("not valid HTTP") });
  });

  it("answers such a HEAD request without a body, so the client can read it", async () => {
    const answer = await rawRequest(Buffer.from(request("/v1/sources/\u00ff", "HEAD"), "latin1"));
    expect(answer.status).toBe(400);
    expect(Number(answer.headers["content-length"])).toBeGreaterThan(0);
    expect(answer.body).toBe("");
  });

  it("tells a refused HEAD by the last request line before the failure, not by the chunk's first bytes", () => {
    const chunk = (text: string) => Buffer.from(text, "latin1");
    const head = "HEAD /v1/x\u00e9 HTTP/1.1\r\nHost: h\r\n\r\n";
    const failureIn = (text: string) => text.indexOf("\u00e9");
    expect(refusedRequestIsHead(chunk(head), failureIn(head))).toBe(true);
    // The chunk starts with the rest of an earlier request's body, or with a pipelined GET.
    for (const before of ["tail of a body}", "GET /v1/users/me HTTP/1.1\r\nHost: h\r\n\r\n"]) {
      const text = before + head;
      expect(refusedRequestIsHead(chunk(text), failureIn(text))).toBe(true);
    }
    // A GET refused after a HEAD earlier in the same chunk is not a HEAD.
    const headThenGet = `HEAD / HTTP/1.1\r\nHost: h\r\n\r\nGET /v1/x\u00e9 HTTP/1.1\r\n\r\n`;
    expect(refusedRequestIsHead(chunk(headThenGet), failureIn(headThenGet))).toBe(false);
    expect(refusedRequestIsHead(chunk("no request line here"), 5)).toBe(false);
    expect(refusedRequestIsHead(undefined, undefined)).toBe(false);
  });

  it("answers a refused HEAD that follows an early 413 on a kept-alive connection in a form the client can read", async () => {
    // After the 413 the rest of the upload is read and dropped, so the next request starts mid-chunk.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, body: string) =>
      new Promise<string>((resolve) => {
        const outgoing = httpRequest({ host: "127.0.0.1", port, method, path, agent }, (response) => {
          response.resume();
          response.on("end", () => resolve(String(response.statusCode)));
        });
        outgoing.on("error", (error) => resolve(`client error: ${error.message}`));
        outgoing.setHeader("content-type", "application/json");
        outgoing.end(body);
      });
    try {
      for (let round = 0; round < 3; round++) {
        expect(await send("POST", "/v1/components", "x".repeat(1024 * 1024 + 10))).toBe("413");
        expect(await send("HEAD", "/v1/sources/\u00e9", "[]")).toBe("400");
      }
    } finally {
      agent.destroy();
    }
  });

  it("maps each parser failure to its status", () => {
    const statusOf = (code: string) => malformedRequestResult(Object.assign(new Error(code), { code }), "r").statusCode;
    expect(statusOf("HPE_HEADER_OVERFLOW")).toBe(431);
    expect(statusOf("HPE_CHUNK_EXTENSIONS_OVERFLOW")).toBe(413);
    expect(statusOf("ERR_HTTP_REQUEST_TIMEOUT")).toBe(408);
    expect(statusOf("HPE_INVALID_METHOD")).toBe(400);
  });
});

describe("the local server on odd request targets", () => {
  it("answers `//` with 404 in the error shape, not 500", async () => {
    for (const method of ["GET", "POST", "OPTIONS"]) {
      const answer = await rawRequest(request("//", method));
      expect([method, answer.status]).toEqual([method, 404]);
      expect(JSON.parse(answer.body)).toEqual({ error: expect.any(String) });
    }
  });

  it("reads a target starting with `//` as a path, and an absolute-form target by its path", async () => {
    expect(requestUrl("//v1/users/me")?.pathname).toBe("//v1/users/me");
    expect(requestUrl("http://elsewhere.example/v1/users/me?x=1")?.pathname).toBe("/v1/users/me");
    const absolute = await rawRequest(request(`http://127.0.0.1:${port}/v1/users/me`));
    expect(absolute.status).toBe(200);
  });

  it("answers a target that is not a path (`*`) with 400 in the error shape", async () => {
    const answer = await rawRequest(request("*", "OPTIONS"));
    expect(answer.status).toBe(400);
    expect(answer.headers["x-request-id"]).toBeDefined();
    expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining("not a path") });
  });
});
