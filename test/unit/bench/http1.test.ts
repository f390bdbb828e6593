import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Connection, ResponseParser, serializeRequest } from "../../../bench/lib/http1.ts";

describe("serializeRequest", () => {
  it("writes a keep-alive request with the body's byte length", () => {
    const text = serializeRequest(
      "POST",
      "127.0.0.1:80",
      "/x?y=1",
      { "content-type": "application/json" },
      '{"é":1}',
    ).toString("utf8");
    expect(text).toBe(
      'POST /x?y=1 HTTP/1.1\r\nhost: 127.0.0.1:80\r\nconnection: keep-alive\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"é":1}',
    );
  });

  it("writes no content-length without a body", () => {
    expect(serializeRequest("GET", "h", "/", {}, undefined).toString()).toBe(
      "GET / HTTP/1.1\r\nhost: h\r\nconnection: keep-alive\r\n\r\n",
    );
  });
});

describe("ResponseParser", () => {
  const fixed = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}';
  const chunked = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n";

  it("parses a Content-Length answer fed one byte at a time", () => {
    const parser = new ResponseParser();
    const done = [];
    for (const byte of Buffer.from(fixed)) done.push(...parser.feed(Buffer.from([byte])));
    expect(done).toHaveLength(1);
    expect(done[0]!.status).toBe(200);
    expect(done[0]!.headers["content-type"]).toBe("application/json");
    expect(done[0]!.body.toString()).toBe('{"ok":true}');
  });

  it("parses chunked bodies and several answers in one chunk", () => {
    const parser = new ResponseParser();
    const done = parser.feed(Buffer.from(chunked + fixed + chunked.slice(0, 60)));
    expect(done.map((response) => [response.status, response.body.toString()])).toEqual([
      [404, "abcdefg"],
      [200, '{"ok":true}'],
    ]);
    const rest = parser.feed(Buffer.from(chunked.slice(60)));
    expect(rest.map((response) => response.body.toString())).toEqual(["abcdefg"]);
  });

  it("takes an answer without Content-Length as having no body", () => {
    const done = new ResponseParser().feed(Buffer.from("HTTP/1.1 204 No Content\r\n\r\n"));
    expect(done).toEqual([{ status: 204, headers: {}, body: Buffer.alloc(0) }]);
  });

  it("refuses what is not HTTP", () => {
    expect(() => new ResponseParser().feed(Buffer.from("SSH-2.0-OpenSSH\r\n\r\n"))).toThrow(/not an HTTP response/);
  });
});

describe("Connection", () => {
  let server: Server;
  let port: number;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        if (request.url === "/close") response.setHeader("connection", "close");
        response.end(`${request.method} ${request.url} ${Buffer.concat(chunks).toString()}`);
      });
    });
    server.on("connection", () => connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("sends requests one after another on one kept-alive socket, and reconnects after a close", async () => {
    const connection = new Connection("127.0.0.1", port, 5000);
    const send = (path: string, body?: string) =>
      connection.send(serializeRequest("POST", `127.0.0.1:${port}`, path, {}, body));
    const before = connections;
    expect((await send("/a", "1")).body.toString()).toBe("POST /a 1");
    expect((await send("/b", "2")).body.toString()).toBe("POST /b 2");
    expect(connections - before).toBe(1);
    expect((await send("/close")).body.toString()).toBe("POST /close ");
    expect((await send("/c", "3")).body.toString()).toBe("POST /c 3");
    expect(connections - before).toBe(2);
    connection.close();
  });

  it("rejects when nothing listens", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const connection = new Connection("127.0.0.1", freePort, 5000);
    await expect(connection.send(serializeRequest("GET", "x", "/", {}, undefined))).rejects.toThrow(/ECONNREFUSED/);
  });
});
