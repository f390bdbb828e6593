import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { invalid } from "#core/errors";
import { MAX_JSON_DEPTH, nestsTooDeep } from "#core/json-depth";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import { type HttpResult, MAX_ERROR_MESSAGE_CHARS } from "#http/responses";
import { defineRoute } from "#http/route";
import { toApiGatewayEvent } from "#local-mode/api-gateway-event";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { type FuzzRequest, judgeAnswer } from "../../support/openapi-arbitraries.ts";

/** Fixes for answers test/e2e/fault-bad-input.test.ts found to be 5xx or out of shape. */

const recorded: HttpEvent = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
);

/** Echoes its body, or fails with `fail` when the body asks for it. */
const echo = defineRoute({
  name: "echo",
  method: "POST",
  path: "/v1/echo",
  summary: "test",
  access: {},
  body: z.object({ value: z.unknown().optional(), fail: z.string().optional() }),
  response: z.unknown(),
  run: async (_deps, { body }) => {
    if (body.fail !== undefined) throw invalid("value", body.fail);
    return { data: body.value };
  },
});

async function post(body: string): Promise<HttpResult> {
  const deps = memoryDeps();
  const { apiKey } = await accountIn(deps, "ada");
  const event: HttpEvent = {
    ...structuredClone(recorded),
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body,
    queryStringParameters: undefined,
  };
  return createHttpHandler(echo, async () => deps)(event, { awsRequestId: "ctx" } as never);
}

const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

describe("JSON bodies nested too deeply", () => {
  it("answers 400 naming the body past the depth limit, where storing it would overflow the stack (a 500)", async () => {
    const result = await post(`{"value": ${nested(10_000)}}`);
    expect(result.statusCode).toBe(400);
    expect(JSON.parse(result.body)).toEqual({
      error: `request body: nests arrays and objects deeper than ${MAX_JSON_DEPTH}`,
      details: [{ field: "body", message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH}` }],
    });
    expect((await post(`[${"[".repeat(200_000)}${"]".repeat(200_000)}]`)).statusCode).toBe(400);
  });

  it("accepts a body exactly at the limit", async () => {
    const result = await post(`{"value": ${nested(MAX_JSON_DEPTH - 1)}}`);
    expect(result.statusCode).toBe(200);
  });

  it("counts only brackets outside strings, escaped quotes included", () => {
    expect(nestsTooDeep('{"a": "[[[[{{{{", "b": "\\"[[["}', 1)).toBe(false);
    expect(nestsTooDeep('{"a": "[[[[{{{{", "b": "\\"[[["}', 0)).toBe(true);
    expect(nestsTooDeep('[[1], {"x": [2]}]', 3)).toBe(false);
    expect(nestsTooDeep('[[1], {"x": [2]}]', 2)).toBe(true);
    expect(nestsTooDeep('"just [[[ a string"', 0)).toBe(false);
  });
});

describe("error messages that quote the input", () => {
  it("cuts a message and each detail past the limit, saying how long it was", async () => {
    const long = "h".repeat(200_000);
    const result = await post(JSON.stringify({ fail: long }));
    expect(result.statusCode).toBe(400);
    expect(result.body.length).toBeLessThan(4 * MAX_ERROR_MESSAGE_CHARS);
    const body = JSON.parse(result.body);
    expect(body.error).toMatch(/^value: h+\.\.\. \(200007 characters\)$/);
    expect(body.details[0].message).toMatch(/^h+\.\.\. \(200000 characters\)$/);
  });

  it("never splits a surrogate pair where it cuts", async () => {
    const result = await post(JSON.stringify({ fail: `${"x".repeat(MAX_ERROR_MESSAGE_CHARS - 1)}😀tail` }));
    expect(JSON.parse(result.body).details[0].message).toMatch(/^x+\.\.\. /);
    expect(result.body).not.toMatch(/\\ud83d/i);
  });

  it("keeps short messages as they are", async () => {
    const result = await post(JSON.stringify({ fail: "short" }));
    expect(JSON.parse(result.body)).toEqual({ error: "value: short", details: [{ field: "value", message: "short" }] });
  });
});

describe("query strings of local mode's API Gateway events", () => {
  const eventOf = (search: string) =>
    toApiGatewayEvent(
      { headers: {}, method: "GET", httpVersion: "1.1", socket: {} } as unknown as IncomingMessage,
      new URL(`http://localhost/v1/users/me${search}`),
      Buffer.alloc(0),
      { routeKey: "GET /v1/users/me" },
      "r",
      0,
    );

  it("keeps names such as __proto__, toString and hasOwnProperty as plain parameters", () => {
    const query = eventOf("?__proto__=a&toString=b&hasOwnProperty=c&constructor=d").queryStringParameters ?? {};
    expect(Object.entries(query)).toEqual([
      ["__proto__", "a"],
      ["toString", "b"],
      ["hasOwnProperty", "c"],
      ["constructor", "d"],
    ]);
    expect(Object.getPrototypeOf(query)).toBe(Object.prototype);
  });

  it("joins repeated parameters with commas, as API Gateway does", () => {
    expect(eventOf("?limit=1&limit=2&toString=x&toString=y").queryStringParameters).toEqual({
      limit: "1,2",
      toString: "x,y",
    });
    expect(eventOf("").queryStringParameters).toBeUndefined();
  });
});

describe("the judge of test/e2e/fault-bad-input.test.ts", () => {
  const request = (overrides: Partial<FuzzRequest> = {}): FuzzRequest => ({
    operation: "get-me",
    label: "test",
    method: "GET",
    target: "/v1/users/me",
    headers: {},
    expect: "api",
    ...overrides,
  });
  const answer = (status: number, body: string, headers: Record<string, string> = {}) => ({
    status,
    body,
    headers: { "content-type": "application/json; charset=utf-8", "x-request-id": "r", ...headers },
  });
  const kindOf = (req: FuzzRequest, ans: Parameters<typeof judgeAnswer>[1]) => judgeAnswer(req, ans)?.kind;

  it("accepts refusals in the error shape and successes", () => {
    expect(kindOf(request(), answer(404, '{"error":"not found"}'))).toBeUndefined();
    const details = '{"error":"bad","details":[{"field":"limit","message":"too big"}],"request_id":"r"}';
    expect(kindOf(request(), answer(400, details))).toBeUndefined();
    expect(kindOf(request({ method: "HEAD" }), answer(400, ""))).toBeUndefined();
    expect(kindOf(request({ expect: "endpoint" }), answer(413, '{"error":"big"}', { "x-request-id": "" }))).toBe(
      undefined,
    );
    expect(kindOf(request(), answer(200, "{}"))).toBeUndefined();
  });

  it("takes an HTML page as the refusal of a route a browser lands on, besides the error shape", () => {
    const page = request({ expect: "page", target: "/v1/accounts/oauth/callback" });
    const html = { "content-type": "text/html; charset=utf-8" };
    expect(kindOf(page, answer(400, "<!doctype html><h1>Missing state</h1>", html))).toBeUndefined();
    // What the pipeline refuses before the route keeps the error shape.
    expect(kindOf(page, answer(413, '{"error":"body too large"}'))).toBeUndefined();
    expect(kindOf(page, answer(400, "not json"))).toBe("bad-shape");
    expect(kindOf(page, answer(400, "<p>no heading</p>", html))).toBe("bad-shape");
    expect(kindOf(page, answer(500, "<h1>Oops</h1>", html))).toBe("server-error");
    expect(kindOf(request(), answer(400, "<h1>Missing state</h1>", html))).toBe("bad-shape");
  });

  it("flags 5xx, no answer, another account's success and refusals out of shape", () => {
    expect(kindOf(request(), answer(500, '{"error":"internal server error"}'))).toBe("server-error");
    expect(kindOf(request(), { status: undefined, error: "socket hang up" })).toBe("no-answer");
    expect(kindOf(request({ foreign: true }), answer(200, "{}"))).toBe("foreign-success");
    for (const body of ["not json", "[]", '{"message":"x"}', '{"error":""}', '{"error":"x","extra":1}']) {
      expect([body, kindOf(request(), answer(400, body))]).toEqual([body, "bad-shape"]);
    }
    expect(kindOf(request(), answer(400, '{"error":"x","details":[{"field":1}]}'))).toBe("bad-shape");
    expect(kindOf(request(), answer(400, '{"error":"x"}', { "content-type": "text/plain" }))).toBe("bad-shape");
    expect(kindOf(request(), answer(400, '{"error":"x"}', { "x-request-id": "" }))).toBe("bad-shape");
  });
});
