import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { invalid } from "#core/errors";
import { jsonDepth, MAX_JSON_DEPTH } from "#core/json-depth";
import { createHttpHandler, type HttpEvent, type HttpResult, MAX_ERROR_MESSAGE_CHARS } from "#http/pipeline";
import { defineRoute } from "#http/route";
import { toApiGatewayEvent } from "#local/api-gateway-event";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";

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
    expect(jsonDepth('{"a": "[[[[{{{{", "b": "\\"[[["}')).toBe(1);
    expect(jsonDepth('[[1], {"x": [2]}]')).toBe(3);
    expect(jsonDepth('"just a string"')).toBe(0);
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
