import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { executeHttpRequest, httpRequestOf } from "#runtime/http-request-prop";
import type { Invocation } from "#runtime/protocol";
import { runInvocation } from "#runtime/run-invocation";

/** What the server on 127.0.0.1 got, newest last. */
const seen: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
let server: Server;
let base = "";

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers, body });
      const path = new URL(request.url ?? "/", base).pathname;
      if (path === "/json") {
        response.writeHead(201, { "content-type": "application/json; charset=utf-8", "x-answer": "yes" });
        response.end(JSON.stringify({ got: body, method: request.method }));
      } else if (path === "/missing") {
        response.writeHead(404, { "content-type": "application/json" }).end('{"error":"nope"}');
      } else if (path === "/hop") {
        response.writeHead(302, { location: "/json" }).end();
      } else if (path === "/loop") {
        response.writeHead(302, { location: "/loop" }).end();
      } else if (path === "/to-file") {
        response.writeHead(302, { location: "file:///etc/passwd" }).end();
      } else {
        response.writeHead(200, { "content-type": "text/plain" }).end("plain text");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const LOCAL = { allowPrivateAddresses: true };
const AWS = { allowPrivateAddresses: false };

describe("an http_request prop's request", () => {
  it("is built from the @pipedream/types form: params, headers, auth and a fields body", () => {
    const request = httpRequestOf({
      url: "https://api.example.test/items?page=1",
      method: "post",
      params: [
        { name: "q", value: "a b" },
        { name: "", value: "skipped" },
      ],
      headers: [{ name: "X-Trace", value: "t1" }],
      auth: { type: "basic", username: "ann", password: "pw" },
      body: { type: "fields", contentType: "application/x-www-form-urlencoded", fields: [{ name: "a", value: "1" }] },
    });
    expect(request.method).toBe("POST");
    expect(request.url.toString()).toBe("https://api.example.test/items?page=1&q=a+b");
    expect(request.headers).toEqual({
      "x-trace": "t1",
      authorization: `Basic ${Buffer.from("ann:pw").toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(request.body?.toString()).toBe("a=1");
  });

  it("refuses what is not an http or https URL, and a method that is not a token", () => {
    expect(() => httpRequestOf({})).toThrow("execute(): the http_request prop has no url");
    expect(() => httpRequestOf({ url: "file:///etc/passwd" })).toThrow("only http and https URLs");
    expect(() => httpRequestOf({ url: "https://x.test", method: "GET /admin" })).toThrow("is not an HTTP method");
  });
});

describe("execute()", () => {
  it("resolves {status, headers, data} with a JSON answer parsed, sending a raw body and a bearer token", async () => {
    const response = await executeHttpRequest(
      {
        url: `${base}/json`,
        method: "PUT",
        auth: { type: "bearer", token: "tok" },
        body: { mode: "raw", contentType: "application/json", raw: '{"n":1}' },
      },
      LOCAL,
    );
    expect(response.status).toBe(201);
    expect(response.headers["x-answer"]).toBe("yes");
    expect(response.data).toEqual({ got: '{"n":1}', method: "PUT" });
    const request = seen.at(-1);
    expect(request?.headers.authorization).toBe("Bearer tok");
    expect(request?.headers["content-type"]).toBe("application/json");
  });

  it("gives a text answer as text and follows a redirect", async () => {
    expect((await executeHttpRequest({ url: `${base}/text` }, LOCAL)).data).toBe("plain text");
    const redirected = await executeHttpRequest({ url: `${base}/hop`, method: "POST" }, LOCAL);
    expect(redirected.status).toBe(201);
    expect(redirected.data).toMatchObject({ method: "GET" });
  });

  it("rejects a non-2xx answer as axios does, with the answer on the error", async () => {
    const failure = await executeHttpRequest({ url: `${base}/missing` }, LOCAL).catch((error) => error);
    expect(failure).toMatchObject({
      name: "HttpRequestError",
      message: "Request failed with status code 404",
      response: { status: 404, data: { error: "nope" } },
    });
    await expect(executeHttpRequest({ url: `${base}/loop` }, LOCAL)).rejects.toThrow("more than 5 redirects");
    await expect(executeHttpRequest({ url: `${base}/to-file` }, LOCAL)).rejects.toThrow(
      "a redirect to file: is not followed",
    );
  });

  it("refuses loopback, private and metadata addresses under AWS settings, also by name", async () => {
    const before = seen.length;
    for (const url of [
      `${base}/json`,
      `http://localhost:${new URL(base).port}/json`,
      "http://169.254.169.254/latest/meta-data/",
      "http://[::ffff:127.0.0.1]/",
      "http://10.0.0.1/",
    ]) {
      await expect(executeHttpRequest({ url }, AWS), url).rejects.toMatchObject({
        name: "ForbiddenAddressError",
        message: expect.stringContaining("execute(): the request was refused"),
      });
    }
    expect(seen.length).toBe(before);
  });
});

describe("execute() in a run", () => {
  const invocation = (overrides: Partial<Invocation>): Invocation => ({
    invocationId: `inv_${Math.random()}`,
    kind: "run",
    sourceId: "dc_test",
    props: {},
    propTypes: {},
    db: {},
    timeoutMs: 5000,
    ...overrides,
  });
  const component = {
    props: { request: { type: "http_request" }, unset: { type: "http_request" } },
    async run(this: any) {
      const answer = await this.request.execute().catch((error: Error) => ({ error: error.name }));
      const unset = await this.unset.execute().catch((error: Error) => error.message);
      this.$emit({ status: answer.status ?? null, data: answer.data ?? null, error: answer.error ?? null, unset });
    },
  };

  it("performs the configured request where the invocation allows private addresses", async () => {
    const result = await runInvocation(
      component,
      invocation({
        props: { request: { url: `${base}/json`, method: "POST" } },
        propTypes: { request: "http_request", unset: "http_request" },
        allowPrivateAddresses: true,
      }),
    );
    expect(result.emits[0]?.event).toEqual({
      status: 201,
      data: { got: "", method: "POST" },
      error: null,
      unset: "execute(): the http_request prop has no url",
    });
  });

  it("refuses a private address when the invocation does not say it may reach one (AWS)", async () => {
    const result = await runInvocation(
      component,
      invocation({
        props: { request: { url: `${base}/json` } },
        propTypes: { request: "http_request", unset: "http_request" },
      }),
    );
    expect(result.emits[0]?.event).toMatchObject({ status: null, error: "ForbiddenAddressError" });
  });
});
