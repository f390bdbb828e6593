/**
 * `Http1WebhookSender` against hostile receivers: real servers on 127.0.0.1, most of them raw TCP
 * servers that answer byte by byte what the test says (slow, huge, never-ending, reset, malformed,
 * redirecting), an HTTPS receiver with its own certificate authority, and the address guard.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Http1WebhookSender } from "#adapters/http1-webhook-sender";

/** A request as a raw server read it. */
interface RawRequest {
  head: string;
  body: string;
  /** Which connection (0, 1, ...) carried it. */
  connection: number;
  socket: Socket;
}

/**
 * A TCP server that reads requests (head, then `Content-Length` bytes) and hands each to `answer`,
 * which writes what it likes to the socket. It counts connections and notes when each closed.
 */
class RawServer {
  readonly requests: RawRequest[] = [];
  readonly sockets: Socket[] = [];
  readonly closedAt: number[] = [];
  port = 0;
  private readonly server: Server;

  constructor(private readonly answer: (request: RawRequest, server: RawServer) => void) {
    this.server = createServer((socket) => this.accept(socket));
  }

  static async start(answer: (request: RawRequest, server: RawServer) => void): Promise<RawServer> {
    const raw = new RawServer(answer);
    servers.push(raw);
    await new Promise<void>((resolve) => raw.server.listen(0, "127.0.0.1", () => resolve()));
    raw.port = (raw.server.address() as AddressInfo).port;
    return raw;
  }

  url(path = "/hook"): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Sockets the server still has open. */
  get open(): number {
    return this.sockets.filter((socket) => !socket.destroyed).length;
  }

  private accept(socket: Socket): void {
    const connection = this.sockets.length;
    this.sockets.push(socket);
    socket.on("error", () => {});
    socket.on("close", () => {
      this.closedAt[connection] = Date.now();
    });
    let buffered = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf("\r\n\r\n");
        if (end === -1) return;
        const head = buffered.toString("latin1", 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.toString("utf8", end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        const request = { head, body, connection, socket };
        this.requests.push(request);
        this.answer(request, this);
      }
    });
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const ok = (request: RawRequest) => request.socket.write(OK);

let servers: { stop(): Promise<void> }[] = [];
const senders: Http1WebhookSender[] = [];

function sender(options: Partial<ConstructorParameters<typeof Http1WebhookSender>[0]> = {}): Http1WebhookSender {
  const made = new Http1WebhookSender({ allowPrivateAddresses: true, ...options });
  senders.push(made);
  return made;
}

afterEach(async () => {
  for (const made of senders.splice(0)) made.close();
  for (const server of servers.splice(0)) await server.stop();
});

/** Polls long enough for a machine under load (vitest's default gives up after 1 s). */
const POLL = { timeout: 5_000 };

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Kept-alive connections waiting for a request, over every origin. */
const idleConnections = (send: Http1WebhookSender) =>
  [...send["pools"].values()].reduce((sum, pool) => sum + pool.idle.length, 0);

describe("Http1WebhookSender: the request", () => {
  it("writes the method, the path and query, the URL's host, the caller's headers and the body, framed by the sender", async () => {
    const raw = await RawServer.start(ok);
    const result = await sender().post(
      `${raw.url("/hook/a")}?x=1&y=%20`,
      {
        "content-type": "application/json",
        "X-Sluice-Signature": "t=1,v1=abc",
        // Framing and hop-by-hop headers are the sender's: a caller's are dropped.
        "Content-Length": "999",
        "transfer-encoding": "chunked",
        host: "evil.example",
        connection: "close",
        "proxy-authorization": "secret",
      },
      '{"é":1}',
      2_000,
    );
    expect(result).toEqual({ status: 200 });
    const [request] = raw.requests;
    expect(request?.head.split("\r\n")).toEqual([
      "POST /hook/a?x=1&y=%20 HTTP/1.1",
      `Host: 127.0.0.1:${raw.port}`,
      "content-type: application/json",
      "X-Sluice-Signature: t=1,v1=abc",
      "Content-Length: 8",
      "Connection: keep-alive",
    ]);
    expect(request?.body).toBe('{"é":1}');
  });

  it("sends a GET without a body with no Content-Length, and credentials in the URL as Basic authorization", async () => {
    const raw = await RawServer.start(ok);
    const url = `http://ada:p%40ss@127.0.0.1:${raw.port}/x#fragment`;
    expect(await sender().post(url, {}, "", 2_000, "GET")).toEqual({ status: 200 });
    expect(raw.requests[0]?.head.split("\r\n")).toEqual([
      "GET /x HTTP/1.1",
      `Host: 127.0.0.1:${raw.port}`,
      `Authorization: Basic ${Buffer.from("ada:p@ss").toString("base64")}`,
      "Connection: keep-alive",
    ]);
    // Credentials that are not valid percent-encoding: a clear error, not a URIError thrown.
    expect(await sender().post(`http://%zz:x@127.0.0.1:${raw.port}/`, {}, "", 2_000, "GET")).toEqual({
      error: "invalid URL: its credentials are not percent-encoded correctly",
    });
    expect(raw.requests).toHaveLength(1);
  });

  it("refuses a header that could split the request, an invalid method or URL, before sending anything", async () => {
    const raw = await RawServer.start(ok);
    const send = sender();
    expect(await send.post(raw.url(), { "x-a": "b\r\nx-injected: 1" }, "{}", 2_000)).toEqual({
      error: "invalid value for header x-a",
    });
    expect(await send.post(raw.url(), { "x a": "b" }, "{}", 2_000)).toEqual({ error: "invalid header name" });
    expect(await send.post(raw.url(), { "x-a": "ā" }, "{}", 2_000)).toEqual({ error: "invalid value for header x-a" });
    expect(await send.post(raw.url(), {}, "{}", 2_000, "GET /x HTTP/1.1\r\n")).toEqual({
      error: "invalid HTTP method",
    });
    expect(await send.post("not a url", {}, "{}", 2_000)).toEqual({ error: "invalid URL" });
    expect(await send.post("ftp://127.0.0.1/", {}, "{}", 2_000)).toEqual({ error: "unsupported protocol ftp:" });
    await settle(50);
    expect(raw.sockets).toEqual([]);
  });
});

describe("Http1WebhookSender: kept-alive connections", () => {
  it("sends one request after another on one connection, and at most the per-origin limit at once", async () => {
    const raw = await RawServer.start((request) => setTimeout(() => ok(request), 5));
    const send = sender({ maxConnectionsPerOrigin: 3 });
    for (let n = 0; n < 5; n++) expect(await send.post(raw.url(), {}, `{"n":${n}}`, 2_000)).toEqual({ status: 200 });
    expect(raw.sockets).toHaveLength(1);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => send.post(raw.url(), {}, `${n}`, 5_000)));
    expect(answers).toEqual(Array.from({ length: 20 }, () => ({ status: 200 })));
    expect(raw.sockets.length).toBeLessThanOrEqual(3);
    expect(raw.requests).toHaveLength(25);
  });

  it("opens a new connection after an answer that ends its connection (Connection: close, no length, HTTP/1.0)", async () => {
    const answers = [
      "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\n\r\nread until the close",
      "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    ];
    const raw = await RawServer.start((request, server) => {
      const answer = answers[server.requests.length - 1];
      if (answer === undefined) return ok(request);
      request.socket.write(answer);
      if (answer.includes("until the close")) request.socket.end();
    });
    const send = sender();
    for (let n = 0; n < 4; n++) expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 1, 2, 3]);
  });

  it("reads a chunked body and a HEAD answer's missing body to their end, and reuses the connection", async () => {
    const raw = await RawServer.start((request, server) => {
      if (request.head.startsWith("HEAD"))
        return request.socket.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
      if (server.requests.length === 1) {
        request.socket.write("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n");
        setTimeout(() => request.socket.write("0\r\nx-trailer: 1\r\n\r\n"), 20);
        return;
      }
      ok(request);
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 201 });
    // The status is answered at the head; the connection is free once the last chunk came.
    await expect.poll(() => idleConnections(send), POLL).toBe(1);
    expect(await send.post(raw.url(), {}, "", 2_000, "HEAD")).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 0, 0]);
  });

  it("skips interim 1xx answers and reports the final status", async () => {
    const raw = await RawServer.start((request) =>
      request.socket.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n${OK}`),
    );
    expect(await sender().post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
  });

  it("retries once, on a new connection, a request whose kept-alive connection the receiver closed meanwhile", async () => {
    // The second request on every connection finds it closed, as when a receiver restarts.
    const raw = await RawServer.start((request, server) => {
      const onItsConnection = server.requests.filter((r) => r.connection === request.connection).length;
      if (onItsConnection === 1) return ok(request);
      request.socket.destroy();
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 0, 1]);
  });

  it("retries only once, and never a request whose new connection was reset", async () => {
    // Answers the very first request, then resets every connection at its first request.
    const raw = await RawServer.start((request, server) => {
      if (server.requests.length === 1) return ok(request);
      request.socket.resetAndDestroy();
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ error: expect.stringMatching(/^ECONNRESET/) });
    // The reused connection, then one retry on a new connection.
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 0, 1]);
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ error: expect.stringMatching(/^ECONNRESET/) });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 0, 1, 2]);
  });

  it("does not retry when the reused connection broke after part of an answer", async () => {
    const raw = await RawServer.start((request, server) => {
      if (server.requests.length === 1) return ok(request);
      request.socket.end("HTTP/1.1 200");
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ error: expect.stringMatching(/^ECONNRESET/) });
    expect(raw.requests).toHaveLength(2);
  });

  it("drops an idle connection the receiver closed, or wrote to unasked, and carries on with a new one", async () => {
    const raw = await RawServer.start((request, server) => {
      ok(request);
      const socket = request.socket;
      if (server.requests.length === 1) setTimeout(() => socket.end(), 10);
      if (server.requests.length === 2) setTimeout(() => socket.write(OK), 10);
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    // The server's side closes once the sender closed its own.
    await expect.poll(() => raw.closedAt[0], POLL).toBeDefined();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    await expect.poll(() => raw.closedAt[1], POLL).toBeDefined();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 1, 2]);
  });

  it("keeps at most maxIdleConnections idle over all origins, closing the longest idle first", async () => {
    // Receivers are users' URLs: a tenant can name as many origins as it likes (127.0.0.0/8, ports).
    const receivers = await Promise.all(Array.from({ length: 8 }, () => RawServer.start(ok)));
    const send = sender({ maxIdleConnections: 3 });
    for (const raw of receivers) expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    await expect.poll(() => receivers.map((raw) => raw.open), POLL).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
    expect(idleConnections(send)).toBe(3);
    // The ones kept are used again; the closed ones' origins get a new connection.
    expect(await send.post(receivers[7]!.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(await send.post(receivers[0]!.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(receivers[7]!.sockets).toHaveLength(1);
    expect(receivers[0]!.sockets).toHaveLength(2);
    // receivers[5] had been idle longest of the three: it made room for receivers[0]'s.
    await expect.poll(() => receivers.map((raw) => raw.open), POLL).toEqual([1, 0, 0, 0, 0, 0, 1, 1]);
  });
});

describe("Http1WebhookSender: hostile receivers", () => {
  it("times out a receiver that never answers, and closes its connection", async () => {
    const raw = await RawServer.start(() => {});
    const started = Date.now();
    expect(await sender().post(raw.url(), {}, "{}", 200)).toEqual({ error: "timeout after 200 ms" });
    expect(Date.now() - started).toBeLessThan(3_000);
    await expect.poll(() => raw.open, POLL).toBe(0);
  });

  it("times out the whole exchange, not each byte: a head dripped slowly still fails at the limit", async () => {
    const raw = await RawServer.start((request) => {
      const drip = setInterval(() => (request.socket.destroyed ? clearInterval(drip) : request.socket.write("X")), 20);
      request.socket.write("HTTP/1.1 200 OK\r\nX-Slow: ");
    });
    const started = Date.now();
    expect(await sender().post(raw.url(), {}, "{}", 300)).toEqual({ error: "timeout after 300 ms" });
    expect(Date.now() - started).toBeLessThan(3_000);
    await expect.poll(() => raw.open, POLL).toBe(0);
  });

  it("counts the wait for a connection in the time limit", async () => {
    const raw = await RawServer.start(() => {});
    const send = sender({ maxConnectionsPerOrigin: 1 });
    const first = send.post(raw.url(), {}, "{}", 300);
    const started = Date.now();
    expect(await send.post(raw.url(), {}, "{}", 200)).toEqual({ error: "timeout after 200 ms" });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await first).toEqual({ error: "timeout after 300 ms" });
    // The request that gave up is not sent later on a connection that came free.
    await settle(100);
    expect(raw.requests).toHaveLength(1);
  });

  it("reports the status of a huge or never-ending answer and cuts its connection at the byte bound", async () => {
    const raw = await RawServer.start((request, server) => {
      const socket = request.socket;
      if (server.requests.length === 1) return socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n");
      socket.write("HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n");
      const flood = () => {
        while (!socket.destroyed && socket.write(`400\r\n${"x".repeat(1024)}\r\n`));
        if (!socket.destroyed) socket.once("drain", flood);
      };
      flood();
    });
    const send = sender({ maxResponseBytes: 4_096 });
    expect(await send.post(raw.url(), {}, "{}", 10_000)).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 10_000)).toEqual({ status: 202 });
    // Both connections are cut long before the 10 s limit: the bound, not the time, ended them.
    await expect.poll(() => raw.open, POLL).toBe(0);
    expect(raw.sockets).toHaveLength(2);
  });

  it("cuts a body that trickles within the byte bound once the time limit passes again", async () => {
    const raw = await RawServer.start((request) => {
      request.socket.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
      const drip = setInterval(() => (request.socket.destroyed ? clearInterval(drip) : request.socket.write("x")), 20);
    });
    const started = Date.now();
    expect(await sender().post(raw.url(), {}, "{}", 300)).toEqual({ status: 200 });
    await expect.poll(() => raw.open, POLL).toBe(0);
    // The head came at once, the body got another 300 ms.
    expect((raw.closedAt[0] ?? 0) - started).toBeGreaterThanOrEqual(280);
    expect((raw.closedAt[0] ?? 0) - started).toBeLessThan(5_000);
  });

  it("reports a reset or a receiver that closes without answering as an error", async () => {
    const reset = await RawServer.start((request) => request.socket.resetAndDestroy());
    expect(await sender().post(reset.url(), {}, "{}", 2_000)).toEqual({ error: expect.stringMatching(/^ECONNRESET/) });
    expect(reset.requests).toHaveLength(1);
    const hangUp = await RawServer.start((request) => request.socket.end());
    expect(await sender().post(hangUp.url(), {}, "{}", 2_000)).toEqual({ error: "ECONNRESET: socket hang up" });
    expect(hangUp.requests).toHaveLength(1);
  });

  it("reports the redirect's status and does not follow it", async () => {
    const elsewhere = await RawServer.start(ok);
    const raw = await RawServer.start((request) =>
      request.socket.write(`HTTP/1.1 302 Found\r\nLocation: ${elsewhere.url()}\r\nContent-Length: 0\r\n\r\n`),
    );
    expect(await sender().post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 302 });
    await settle(50);
    expect(elsewhere.sockets).toEqual([]);
  });

  it.each([
    ["not HTTP", "hello\r\n\r\n", "malformed status line"],
    ["bare line feeds", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", "bare line feed in the head"],
    ["HTTP/2 text", "HTTP/2.0 200 OK\r\n\r\n", "malformed status line"],
    ["a folded header", "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n", "malformed header line"],
    ["a space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", "malformed header line"],
    [
      "two lengths",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok",
      "two different Content-Length values",
    ],
    ["a negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length"],
    [
      "a length beside chunked coding",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "both Transfer-Encoding and Content-Length",
    ],
    ["a head over 16 KiB", `HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(17_000)}\r\n\r\n`, "response head over 16384 bytes"],
    ["endless interim answers", "HTTP/1.1 100 Continue\r\n\r\n".repeat(20), "too many interim responses"],
  ])("refuses a malformed answer: %s", async (_, answer, reason) => {
    const raw = await RawServer.start((request) => request.socket.write(answer));
    expect(await sender().post(raw.url(), {}, "{}", 2_000)).toEqual({ error: `malformed response: ${reason}` });
    await expect.poll(() => raw.open, POLL).toBe(0);
  });

  it("keeps the status of an answer whose body framing is broken, and does not reuse its connection", async () => {
    const raw = await RawServer.start((request, server) => {
      if (server.requests.length === 1) {
        return request.socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
      }
      ok(request);
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(raw.requests.map((request) => request.connection)).toEqual([0, 1]);
  });

  it("answers the requests in flight and later ones with an error once closed, and opens no connection after", async () => {
    // The first request is answered; the second, on the kept-alive connection, never is.
    const raw = await RawServer.start((request, server) => {
      if (server.requests.length === 1) ok(request);
    });
    const send = sender();
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ status: 200 });
    const inFlight = send.post(raw.url(), {}, "{}", 30_000);
    await expect.poll(() => raw.requests.length, POLL).toBe(2);
    send.close();
    // Cut by the close, it is not retried as a stale connection would be.
    expect(await inFlight).toEqual({ error: "the webhook sender is closed" });
    expect(await send.post(raw.url(), {}, "{}", 2_000)).toEqual({ error: "the webhook sender is closed" });
    await expect.poll(() => raw.open, POLL).toBe(0);
    await settle(50);
    expect(raw.sockets).toHaveLength(1);
  });
});

describe("Http1WebhookSender: addresses", () => {
  it("refuses loopback, private and mapped addresses without private addresses allowed, and sends nothing", async () => {
    const raw = await RawServer.start(ok);
    const guarded = sender({ allowPrivateAddresses: false });
    for (const url of [
      raw.url(),
      `http://localhost:${raw.port}/hook`,
      `http://[::ffff:127.0.0.1]:${raw.port}/hook`,
      `http://[::ffff:7f00:1]:${raw.port}/hook`,
      `http://[::1]:${raw.port}/hook`,
      `https://localhost:${raw.port}/hook`,
      "http://169.254.169.254/latest/meta-data/",
      "http://10.0.0.1/",
      "http://[fd00::1]/",
    ]) {
      expect(await guarded.post(url, {}, "{}", 2_000), url).toEqual({ error: expect.stringMatching(/^refused: /) });
    }
    await settle(50);
    expect(raw.sockets).toEqual([]);
  });

  it("connects to the very address its lookup answered, without resolving the name again", async () => {
    const raw = await RawServer.start(ok);
    const asked: string[] = [];
    const send = sender({
      // `.invalid` never resolves (RFC 6761): the connection can only go where this lookup says.
      lookup: ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
        asked.push(hostname);
        if (options.all) callback(null, [{ address: "127.0.0.1", family: 4 }]);
        else callback(null, "127.0.0.1", 4);
      }) as never,
    });
    expect(await send.post(`http://webhook.invalid:${raw.port}/hook`, {}, "{}", 2_000)).toEqual({ status: 200 });
    expect(asked).toEqual(["webhook.invalid"]);
    expect(raw.requests[0]?.head).toContain(`Host: webhook.invalid:${raw.port}`);
    // Without it, the name does not resolve.
    expect(await sender().post(`http://webhook.invalid:${raw.port}/hook`, {}, "{}", 2_000)).toEqual({
      error: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN): webhook.invalid could not be resolved/),
    });
  });

  it("answers a refused connection as an error naming the host", async () => {
    const raw = await RawServer.start(ok);
    const url = raw.url();
    await raw.stop();
    servers = servers.filter((server) => server !== raw);
    expect(await sender().post(url, {}, "{}", 2_000)).toEqual({
      error: `ECONNREFUSED: 127.0.0.1:${raw.port} refused the connection`,
    });
  });
});

describe("Http1WebhookSender: HTTPS", () => {
  let dir: string;
  let ca: string;
  let key: string;
  let cert: string;

  beforeAll(() => {
    // A certificate authority, and a certificate it signed for localhost only.
    dir = mkdtempSync(join(tmpdir(), "sluice-tls-"));
    const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
    run(
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Sluice test CA",
    );
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.csr", "-subj", "/CN=localhost");
    const extensions = join(dir, "san.cnf");
    execFileSync("sh", ["-c", `printf 'subjectAltName=DNS:localhost' > ${extensions}`]);
    run(
      "x509",
      "-req",
      "-in",
      "cert.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "cert.pem",
      "-days",
      "2",
      "-extfile",
      extensions,
    );
    ca = readFileSync(join(dir, "ca.pem"), "utf8");
    key = readFileSync(join(dir, "key.pem"), "utf8");
    cert = readFileSync(join(dir, "cert.pem"), "utf8");
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function httpsReceiver(): Promise<{ port: number; connections: () => number }> {
    let connections = 0;
    const server = createHttpsServer({ key, cert }, (request, response) => {
      request.resume();
      request.on("end", () => response.writeHead(200).end("ok"));
    });
    server.on("secureConnection", () => connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    servers.push({
      stop: () => {
        server.closeAllConnections();
        return new Promise<void>((resolve) => server.close(() => resolve()));
      },
    });
    return { port: (server.address() as AddressInfo).port, connections: () => connections };
  }

  it("sends over TLS on kept-alive connections to a receiver whose certificate verifies", async () => {
    const { port, connections } = await httpsReceiver();
    const send = sender({ ca });
    for (let n = 0; n < 3; n++) {
      expect(await send.post(`https://localhost:${port}/hook`, {}, "{}", 5_000)).toEqual({ status: 200 });
    }
    expect(connections()).toBe(1);
  });

  it("refuses a certificate it cannot verify, or one for another name", async () => {
    const { port } = await httpsReceiver();
    expect(await sender().post(`https://localhost:${port}/hook`, {}, "{}", 5_000)).toEqual({
      error: expect.stringMatching(/^UNABLE_TO_VERIFY_LEAF_SIGNATURE|^SELF_SIGNED_CERT_IN_CHAIN/),
    });
    expect(await sender({ ca }).post(`https://127.0.0.1:${port}/hook`, {}, "{}", 5_000)).toEqual({
      error: expect.stringMatching(/^ERR_TLS_CERT_ALTNAME_INVALID/),
    });
  });
});
