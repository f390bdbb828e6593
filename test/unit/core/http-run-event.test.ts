import { describe, expect, it } from "vitest";
import {
  corsPreflightHeaders,
  corsPreflightResponse,
  DEFAULT_HTTP_RESPONSE,
  ENDED_WITHOUT_RESPOND_RESPONSE,
  FAILED_BEFORE_RESPOND_RESPONSE,
  INACTIVE_SOURCE_RESPONSE,
  type IncomingHttpRequest,
  MAX_HTTP_INTERFACE_BODY_BYTES,
  NO_RESPONSE_TIMEOUT_STATUS,
  PAYLOAD_TOO_LARGE_RESPONSE,
  RESPOND_TIMEOUT_RESPONSE,
  toHttpRunEvent,
  UNKNOWN_ENDPOINT_RESPONSE,
} from "#core/http-run-event";
import { MAX_JSON_DEPTH } from "#core/json-depth";

function request(overrides: Partial<IncomingHttpRequest> = {}): IncomingHttpRequest {
  return {
    method: "POST",
    path: "/",
    rawQuery: "",
    headers: {},
    body: Buffer.alloc(0),
    clientIp: "127.0.0.1",
    url: "http://127.0.0.1:8080/e/abc",
    ...overrides,
  };
}

function withBody(contentType: string | undefined, body: string | Buffer): IncomingHttpRequest {
  return request({
    headers: contentType === undefined ? {} : { "Content-Type": contentType },
    body: typeof body === "string" ? Buffer.from(body, "utf8") : body,
  });
}

function multipart(boundary: string, parts: string[]): Buffer {
  return Buffer.from(`${parts.map((part) => `--${boundary}\r\n${part}\r\n`).join("")}--${boundary}--\r\n`, "utf8");
}

describe("toHttpRunEvent", () => {
  it("gives method, path, url and client ip, and no body when the body is empty", () => {
    const event = toHttpRunEvent(
      request({ method: "get", path: "/hooks/a", clientIp: "10.0.0.7", url: "http://x/e/abc/hooks/a" }),
    );
    expect(event).toEqual({
      method: "GET",
      path: "/hooks/a",
      query: {},
      headers: {},
      bodyRaw: "",
      url: "http://x/e/abc/hooks/a",
      client_ip: "10.0.0.7",
    });
    expect("body" in event).toBe(false);
  });

  it("starts the path with a slash", () => {
    expect(toHttpRunEvent(request({ path: "" })).path).toBe("/");
    expect(toHttpRunEvent(request({ path: "a/b" })).path).toBe("/a/b");
  });

  it("lower-cases header names and joins repeated values", () => {
    const event = toHttpRunEvent(
      request({
        headers: {
          "X-Custom": "One",
          "Set-Cookie": ["a=1", "b=2"],
          "x-custom": "Two",
          "X-Missing": undefined,
        },
      }),
    );
    expect(event.headers).toEqual({ "x-custom": "One, Two", "set-cookie": "a=1, b=2" });
  });

  it.each([
    ["a=1&b=2", { a: "1", b: "2" }],
    ["?a=1", { a: "1" }],
    ["tag=x&tag=y&tag=z", { tag: ["x", "y", "z"] }],
    ["q=hello+world&e=%C3%A9", { q: "hello world", e: "é" }],
    ["flag&empty=", { flag: "", empty: "" }],
    ["bad=%E0%A4%A&ok=1", { bad: "\uFFFD%A", ok: "1" }],
    ["", {}],
  ])("parses the query %j", (rawQuery, expected) => {
    expect(toHttpRunEvent(request({ rawQuery })).query).toEqual(expected);
  });

  it("keeps a query key named __proto__ as data", () => {
    const query = toHttpRunEvent(request({ rawQuery: "__proto__=x&a=1" })).query;
    expect(Object.hasOwn(query, "__proto__")).toBe(true);
    expect(JSON.parse(JSON.stringify(query))).toEqual(JSON.parse('{"__proto__":"x","a":"1"}'));
    expect(Object.getPrototypeOf(query)).toBe(Object.prototype);
  });

  it("keeps headers named like Object.prototype members (__proto__, constructor, toString) as data", () => {
    const headers = toHttpRunEvent(
      request({ headers: JSON.parse('{"__proto__":"p","constructor":"a","Constructor":"b","toString":"t"}') }),
    ).headers;
    expect(JSON.parse(JSON.stringify(headers))).toEqual(
      JSON.parse('{"__proto__":"p","constructor":"a, b","tostring":"t"}'),
    );
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
  });

  it.each([
    ["application/json", '{"a":1,"b":[true,null]}', { a: 1, b: [true, null] }],
    ["application/json; charset=utf-8", "[1,2]", [1, 2]],
    ["Application/JSON", '"text"', "text"],
    ["application/vnd.api+json", '{"data":{}}', { data: {} }],
    ["application/json", '\uFEFF{"bom":true}', { bom: true }],
    ["application/json", "{not json", "{not json"],
    ["application/x-www-form-urlencoded", "a=1&b=two+words&a=3", { a: ["1", "3"], b: "two words" }],
    ["text/plain", "just text", "just text"],
    [undefined, '{"a":1}', '{"a":1}'],
    ["application/xml", "<a/>", "<a/>"],
  ])("parses a %s body", (contentType, raw, expected) => {
    const event = toHttpRunEvent(withBody(contentType, raw));
    expect(event.bodyRaw).toBe(raw);
    expect(event.body).toEqual(expected);
  });

  it("turns multipart fields into keys and files into descriptions", () => {
    const body = multipart("XyZ", [
      'Content-Disposition: form-data; name="title"\r\n\r\nHello, wörld',
      'Content-Disposition: form-data; name="tag"\r\n\r\none',
      'Content-Disposition: form-data; name="tag"\r\n\r\ntwo',
      'Content-Disposition: form-data; name="upload"; filename="notes.txt"\r\nContent-Type: text/plain\r\n\r\nline 1\r\nline 2',
      'Content-Disposition: form-data; name="blob"; filename="a.bin"\r\n\r\n\u0001\u0002',
      'Content-Disposition: form-data; name="named"; filename="x.txt"; filename*=UTF-8\'\'na%C3%AFve.txt\r\n\r\n',
      "Content-Disposition: form-data\r\n\r\nno name, ignored",
    ]);
    const event = toHttpRunEvent(withBody('multipart/form-data; boundary="XyZ"', body));
    expect(event.body).toEqual({
      title: "Hello, wörld",
      tag: ["one", "two"],
      upload: { filename: "notes.txt", mimetype: "text/plain", size: "line 1\r\nline 2".length },
      blob: { filename: "a.bin", mimetype: "application/octet-stream", size: 2 },
      named: { filename: "naïve.txt", mimetype: "application/octet-stream", size: 0 },
    });
  });

  it("keeps binary file content out of the parsed body but counts its bytes", () => {
    const bytes = Buffer.from([0xff, 0x00, 0x0d, 0x0a, 0x2d, 0x2d, 0x80]);
    const body = Buffer.concat([
      Buffer.from(
        '--b\r\nContent-Disposition: form-data; name="f"; filename="img.png"\r\nContent-Type: image/png\r\n\r\n',
      ),
      bytes,
      Buffer.from("\r\n--b--"),
    ]);
    expect(toHttpRunEvent(withBody("multipart/form-data; boundary=b", body)).body).toEqual({
      f: { filename: "img.png", mimetype: "image/png", size: bytes.length },
    });
  });

  it.each([
    ["no boundary parameter", "multipart/form-data", "--b\r\n\r\nx\r\n--b--"],
    ["a boundary that never occurs", "multipart/form-data; boundary=zzz", "--b\r\n\r\nx\r\n--b--"],
    [
      "a part cut short",
      "multipart/form-data; boundary=b",
      '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nunfinished',
    ],
    ["garbage", "multipart/form-data; boundary=b", "--b"],
  ])("falls back to the raw string for multipart with %s", (_, contentType, raw) => {
    const event = toHttpRunEvent(withBody(contentType, raw));
    expect(event.body).toBe(raw);
  });

  it("keeps a JSON body nested past the limit as text, so storing it cannot overflow the stack", () => {
    const nested = (depth: number) => `${"[".repeat(depth)}1${"]".repeat(depth)}`;
    const deep = nested(5_000);
    const event = toHttpRunEvent(withBody("application/json", deep));
    expect(event.body).toBe(deep);
    expect(() => JSON.stringify(event)).not.toThrow();
    const justPast = nested(MAX_JSON_DEPTH + 1);
    expect(toHttpRunEvent(withBody("application/json", justPast)).body).toBe(justPast);
    expect(toHttpRunEvent(withBody("application/json", nested(MAX_JSON_DEPTH))).body).toEqual(
      JSON.parse(nested(MAX_JSON_DEPTH)),
    );
  });

  it("collects a field repeated many times into one array of every value", () => {
    const repeats = 50_000;
    const event = toHttpRunEvent(withBody("application/x-www-form-urlencoded", "a=1&".repeat(repeats)));
    const values = (event.body as { a: string[] }).a;
    expect(values).toHaveLength(repeats);
    expect(new Set(values)).toEqual(new Set(["1"]));
  });

  it("never throws on arbitrary bytes under any content type", () => {
    const types = [
      "application/json",
      "multipart/form-data; boundary=",
      "application/x-www-form-urlencoded",
      "a;;;=",
      "",
    ];
    for (let seed = 0; seed < 200; seed += 1) {
      const bytes = Buffer.from(Array.from({ length: (seed * 7) % 64 }, (_, i) => (seed * 31 + i * 17) % 256));
      for (const type of types) expect(() => toHttpRunEvent(withBody(type, bytes))).not.toThrow();
    }
  });
});

describe("fixed responses", () => {
  it("answers preflights for any origin, echoing the requested headers", () => {
    expect(corsPreflightHeaders({ "Access-Control-Request-Headers": "authorization, content-type" })).toEqual({
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET,HEAD,PUT,PATCH,POST,DELETE",
      "access-control-allow-headers": "authorization, content-type",
    });
    expect(corsPreflightHeaders({})["access-control-allow-headers"]).toBe("*");
    expect(corsPreflightResponse({}).status).toBe(204);
  });

  it("gives a JSON 200 by default", () => {
    expect(DEFAULT_HTTP_RESPONSE.status).toBe(200);
    expect(DEFAULT_HTTP_RESPONSE.headers["content-type"]).toMatch(/^application\/json/);
    expect(JSON.parse(DEFAULT_HTTP_RESPONSE.body)).toEqual({ success: true });
  });

  it("marks the answer of an inactive source", () => {
    expect(INACTIVE_SOURCE_RESPONSE.status).toBe(200);
    expect(INACTIVE_SOURCE_RESPONSE.headers["x-sluice-source-inactive"]).toBe("1");
    expect(JSON.parse(INACTIVE_SOURCE_RESPONSE.body).error).toMatch(/inactive/);
  });

  it.each([
    [RESPOND_TIMEOUT_RESPONSE, NO_RESPONSE_TIMEOUT_STATUS, "the source did not respond in time"],
    [ENDED_WITHOUT_RESPOND_RESPONSE, 400, "the source ended without calling respond"],
    [FAILED_BEFORE_RESPOND_RESPONSE, 400, "the source failed before responding"],
    [PAYLOAD_TOO_LARGE_RESPONSE, 413, `the request body is larger than ${MAX_HTTP_INTERFACE_BODY_BYTES} bytes`],
    [UNKNOWN_ENDPOINT_RESPONSE, 404, "no source or active workflow listens at this endpoint"],
  ])("answers %# when the source gives no response", (response, status, error) => {
    expect(response.status).toBe(status);
    expect(JSON.parse(response.body)).toEqual({ error });
  });

  it("cannot be changed by a caller", () => {
    expect(() => {
      DEFAULT_HTTP_RESPONSE.headers["x-extra"] = "1";
    }).toThrow(TypeError);
    expect(MAX_HTTP_INTERFACE_BODY_BYTES).toBe(524_288);
  });
});
