import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NodeHttpProviderClient } from "#adapters/node-http-provider-client";
import type { ProviderRequest } from "#core/ports/provider-http";

/*
 * The provider client against a hostile provider on 127.0.0.1: answers too large or too slow,
 * redirects (never followed), and private addresses refused unless allowed. Errors never quote
 * the URL or a header, which carry tokens.
 */

let server: Server;
let origin: string;
const seen: { method: string; url: string; body: string; headers: Record<string, unknown> }[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      seen.push({
        method: request.method ?? "",
        url: request.url ?? "",
        body: Buffer.concat(chunks).toString("utf8"),
        headers: request.headers,
      });
      if (request.url?.startsWith("/huge")) {
        response.writeHead(200, { "content-type": "application/json" });
        // Streams without end: the client must cut it at its bound.
        const chunk = "x".repeat(16 * 1024);
        const pump = () => {
          while (response.write(chunk)) {}
        };
        response.on("drain", pump);
        pump();
        return;
      }
      if (request.url?.startsWith("/slow")) return; // never answers
      if (request.url?.startsWith("/redirect")) {
        response.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
        return;
      }
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
);

const allowing = new NodeHttpProviderClient({ allowPrivateAddresses: true });
const guarded = new NodeHttpProviderClient({ allowPrivateAddresses: false });
const request = (overrides: Partial<ProviderRequest>): ProviderRequest => ({
  method: "GET",
  url: `${origin}/ok`,
  headers: {},
  timeoutMs: 2_000,
  maxResponseBytes: 1024,
  ...overrides,
});

describe("NodeHttpProviderClient", () => {
  it("sends the method, headers and body and answers the status, type and body", async () => {
    const answer = await allowing.request(
      request({ method: "POST", url: `${origin}/ok?x=1`, headers: { accept: "application/json" }, body: "a=b" }),
    );
    expect(answer).toEqual({ status: 200, contentType: "application/json", body: '{"ok":true}' });
    expect(seen.at(-1)).toMatchObject({ method: "POST", url: "/ok?x=1", body: "a=b" });
    expect(seen.at(-1)?.headers).toMatchObject({ accept: "application/json", "content-length": "3" });
  });

  it("cuts an answer past its bound", async () => {
    expect(await allowing.request(request({ url: `${origin}/huge` }))).toEqual({
      error: "the answer is larger than 1024 bytes",
    });
  });

  it("gives up after its time limit", async () => {
    expect(await allowing.request(request({ url: `${origin}/slow`, timeoutMs: 200 }))).toEqual({
      error: "no answer within 200 ms",
    });
  });

  it("follows no redirect: a 302 is an answer", async () => {
    const answer = await allowing.request(request({ url: `${origin}/redirect` }));
    expect(answer).toMatchObject({ status: 302 });
    expect(seen.filter((entry) => entry.url.includes("meta-data"))).toEqual([]);
  });

  it("refuses private addresses, literal or by name, unless allowed, without quoting the URL", async () => {
    const before = seen.length;
    const literal = await guarded.request(request({ url: `${origin}/ok?token=secret-1` }));
    const named = await guarded.request(
      request({ url: `${origin.replace("127.0.0.1", "localhost")}/ok?token=secret-2` }),
    );
    expect(literal).toEqual({ error: "refused: the provider's host is a private address" });
    expect(named).toEqual({ error: "refused: the provider's host is a private address" });
    expect(seen.length).toBe(before);
  });

  it("names a failure without the URL or a header that carries a token", async () => {
    const refused = await allowing.request(request({ url: "http://127.0.0.1:9/me?token=secret-3" }));
    expect(refused).toEqual({ error: "ECONNREFUSED: the provider refused the connection" });
    const badHeader = await allowing.request(request({ headers: { "x-token": "secret-4\r\nx-evil: 1" } }));
    expect(badHeader).toEqual({ error: "invalid request header" });
  });
});
