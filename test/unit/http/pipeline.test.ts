import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as z from "zod";
import type { Deps } from "#core/ports/deps";
import { jsonLogger, type Logger } from "#core/ports/logger";
import { deploySource } from "#core/sources";
import { ANSWER_MARGIN_MS, API_GATEWAY_LIMIT_MS } from "#http/answer-deadline";
import { route as connectConfigure } from "#http/connect-configure-component-prop";
import { route as createComponent } from "#http/create-component";
import { route as createSource } from "#http/create-source";
import { route as createWebhook } from "#http/create-webhook";
import { route as getMe } from "#http/get-me";
import { route as getWorkspace } from "#http/get-workspace";
import { MAX_JSON_BODY_BYTES } from "#http/limits";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import type { HttpResult } from "#http/responses";
import { defineRoute } from "#http/route";
import { routes } from "#http/routes";
import { route as updateSource } from "#http/update-source";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

const recorded: HttpEvent = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
);

function eventFor(overrides: Partial<HttpEvent> & { authorization?: string }): HttpEvent {
  const { authorization, ...rest } = overrides;
  const event = structuredClone(recorded);
  if (authorization === undefined) delete event.headers.authorization;
  else event.headers.authorization = authorization;
  return { ...event, ...rest };
}

async function invoke(
  route: Parameters<typeof createHttpHandler>[0],
  deps: Deps,
  event: HttpEvent,
): Promise<HttpResult> {
  const handler = createHttpHandler(route, async () => deps);
  return handler(event, { awsRequestId: "ctx-id" } as never);
}

const json = (result: HttpResult) => JSON.parse(result.body);

/** A route used only here, to drive the body rules that every POST and PUT route gets. */
const echo = defineRoute({
  name: "echo",
  method: "POST",
  path: "/v1/echo",
  summary: "test",
  access: {},
  body: z.object({ name: z.string().min(1, "must not be empty"), count: z.number().int().optional() }),
  response: z.unknown(),
  run: async (_deps, { body }) => ({ data: body }),
});

describe("the HTTP pipeline on a recorded API Gateway event", () => {
  it("answers a member's workspace, filtered by include, with the request id header", async () => {
    const deps = memoryDeps();
    const { apiKey, workspace } = await accountIn(deps, "ada");
    const result = await invoke(
      getWorkspace,
      deps,
      eventFor({ authorization: `Bearer ${apiKey}`, pathParameters: { workspace_id: workspace.id } }),
    );
    expect(result.statusCode).toBe(200);
    expect(result.headers["content-type"]).toMatch(/^application\/json/);
    expect(result.headers["x-request-id"]).toBe(recorded.requestContext.requestId);
    expect(json(result)).toEqual({ data: { id: workspace.id, name: "ada" } });
  });

  it("answers 401 with the error shape and a Bearer challenge when the key is missing or wrong", async () => {
    const deps = memoryDeps();
    await accountIn(deps, "ada");
    for (const authorization of [undefined, "Bearer not-a-key-at-all"]) {
      const result = await invoke(getMe, deps, eventFor({ authorization }));
      expect(result.statusCode).toBe(401);
      expect(result.headers["www-authenticate"]).toMatch(/^Bearer/);
      expect(Object.keys(json(result))).toEqual(["error"]);
    }
  });

  it("answers 404 for another account's workspace, with the same body as for a missing one", async () => {
    const deps = memoryDeps();
    const alice = await accountIn(deps, "alice");
    const bob = await accountIn(deps, "bob");
    const auth = `Bearer ${alice.apiKey}`;
    const other = await invoke(
      getWorkspace,
      deps,
      eventFor({ authorization: auth, pathParameters: { workspace_id: bob.workspace.id } }),
    );
    const missing = await invoke(
      getWorkspace,
      deps,
      eventFor({ authorization: auth, pathParameters: { workspace_id: "o_0000000000000000000000" } }),
    );
    expect(other.statusCode).toBe(404);
    expect(other.body).toBe(missing.body);
  });

  it("answers 404 for another account's project on a Connect path before reading the body, as for a missing one", async () => {
    const deps = memoryDeps();
    const alice = await accountIn(deps, "alice");
    const bob = await accountIn(deps, "bob");
    const [bobs] = await deps.identity.listProjects(bob.workspace.id);
    const post = (projectId: string, kind = "actions") =>
      invoke(connectConfigure, deps, {
        ...eventFor({
          authorization: `Bearer ${alice.apiKey}`,
          pathParameters: { project_id: projectId, component_kind: kind },
        }),
        headers: { authorization: `Bearer ${alice.apiKey}`, "content-type": "application/json" },
        // No `id` nor `prop_name`: a 400 if the body were read first.
        body: "{}",
      });
    const other = await post(bobs?.id ?? "");
    const missing = await post(`proj_${"0".repeat(22)}`);
    expect(other.statusCode).toBe(404);
    expect(json(other).error).toBe("project not found");
    expect(other.body).toBe(missing.body);
    const [own] = await deps.identity.listProjects(alice.workspace.id);
    const mine = await post(own?.id ?? "");
    expect(mine.statusCode).toBe(400);
    expect(json(mine).details.map((d: { field: string }) => d.field)).toEqual(["id", "prop_name"]);
    // A word other than components, actions or triggers is a route that does not exist, before the body too.
    const word = await post(own?.id ?? "", "sources");
    expect(word.statusCode).toBe(404);
    expect(json(word).error).toBe(`no route for POST /v1/connect/${own?.id}/sources/configure`);
  });

  it("answers 400 naming the path parameter when an id has the wrong prefix", async () => {
    const deps = memoryDeps();
    const { apiKey } = await accountIn(deps, "ada");
    const result = await invoke(
      getWorkspace,
      deps,
      eventFor({ authorization: `Bearer ${apiKey}`, pathParameters: { workspace_id: "dc_123" } }),
    );
    expect(result.statusCode).toBe(400);
    expect(json(result)).toEqual({
      error: "workspace_id: must be an id: o_ followed by 1 to 64 letters, digits, '_' or '-'",
      details: [
        { field: "workspace_id", message: "must be an id: o_ followed by 1 to 64 letters, digits, '_' or '-'" },
      ],
    });
  });

  it("answers 500 with only a request id when something unexpected fails, and logs the cause with that id", async () => {
    const deps = memoryDeps();
    const { apiKey } = await accountIn(deps, "ada");
    const logged: Record<string, unknown>[] = [];
    const log: Logger = {
      debug() {},
      info() {},
      warn() {},
      error: (message, fields) => logged.push({ message, ...fields }),
      child: (base) => ({ ...log, error: (message, fields) => logged.push({ message, ...base, ...fields }) }),
    };
    deps.log = log;
    deps.usage.getUsage = async () => {
      throw new Error("disk on fire at /var/secret/path");
    };
    const result = await invoke(getMe, deps, eventFor({ authorization: `Bearer ${apiKey}` }));
    expect(result.statusCode).toBe(500);
    expect(json(result)).toEqual({ error: "internal server error", request_id: recorded.requestContext.requestId });
    expect(result.body).not.toContain("fire");
    expect(logged).toEqual([
      expect.objectContaining({
        request_id: recorded.requestContext.requestId,
        error: "disk on fire at /var/secret/path",
        stack: expect.any(String),
      }),
    ]);
  });

  it("logs why a request failed when its dependencies could not be made (no logger of theirs yet), on stderr", async () => {
    const handler = createHttpHandler(getMe, async () => {
      throw new Error("SLUICE_TABLE_NAME: required");
    });
    const lines: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string) => lines.push(String(chunk)) > 0) as typeof process.stderr.write;
    let result: HttpResult;
    try {
      result = await handler(eventFor({}), { awsRequestId: "ctx-id" } as never);
    } finally {
      process.stderr.write = write;
    }
    expect(result.statusCode).toBe(500);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({
        level: "error",
        message: "unhandled error",
        request_id: recorded.requestContext.requestId,
        error: "SLUICE_TABLE_NAME: required",
      }),
    ]);
  });

  describe("request bodies", () => {
    async function post(body: string | undefined, contentType?: string) {
      const deps = memoryDeps();
      const { apiKey } = await accountIn(deps, "ada");
      const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
      if (contentType) headers["content-type"] = contentType;
      return invoke(echo, deps, {
        ...eventFor({ authorization: `Bearer ${apiKey}` }),
        headers,
        body,
        queryStringParameters: undefined,
      });
    }

    it("parses and validates a JSON body", async () => {
      const result = await post(JSON.stringify({ name: "x", count: 2 }), "application/json; charset=utf-8");
      expect(result.statusCode).toBe(200);
      expect(json(result)).toEqual({ data: { name: "x", count: 2 } });
    });

    it("answers 400 naming each invalid field", async () => {
      const result = await post(JSON.stringify({ name: "", count: "two" }), "application/json");
      expect(result.statusCode).toBe(400);
      expect(json(result).details.map((d: { field: string }) => d.field)).toEqual(["name", "count"]);
      expect(json(result).error).toMatch(/^name: must not be empty; count: /);
    });

    it("answers 400 for malformed JSON", async () => {
      const result = await post('{"name": "x",', "application/json");
      expect(result.statusCode).toBe(400);
      expect(json(result).error).toMatch(/^request body is not valid JSON/);
    });

    it("answers 415 for a body without a JSON content type", async () => {
      expect((await post(JSON.stringify({ name: "x" }), "text/plain")).statusCode).toBe(415);
      expect((await post(JSON.stringify({ name: "x" }))).statusCode).toBe(415);
    });

    it("answers 413 for a body over the limit", async () => {
      const result = await post(JSON.stringify({ name: "x".repeat(MAX_JSON_BODY_BYTES) }), "application/json");
      expect(result.statusCode).toBe(413);
      expect(json(result).error).toMatch(/larger than/);
    });

    it("validates an absent body as an empty object", async () => {
      const result = await post(undefined);
      expect(result.statusCode).toBe(400);
      expect(json(result).details[0].field).toBe("name");
    });
  });

  it("answers every input-free route's success body in the shape its response schema declares", async () => {
    const deps = memoryDeps();
    const { apiKey, workspace } = await accountIn(deps, "ada");
    // Routes that need a body or another resource's id are checked against their schemas end to end;
    // an HTML route answers a browser's redirect (the OAuth callback: test/unit/http/oauth-callback.test.ts).
    const inputFree = routes.filter(
      (route) => route.method === "GET" && !/\{(?!workspace_id\})/.test(route.path) && route.answers !== "html",
    );
    expect(inputFree.map((route) => route.name)).toContain("list-user-sources");
    for (const route of inputFree) {
      const result = await invoke(
        route,
        deps,
        eventFor({
          authorization: `Bearer ${apiKey}`,
          pathParameters: { workspace_id: workspace.id },
          queryStringParameters: undefined,
        }),
      );
      expect(result.statusCode, route.name).toBe(route.successStatus ?? 200);
      const parsed = route.response.safeParse(json(result));
      expect(parsed.success, `${route.name}: ${parsed.error?.message}`).toBe(true);
    }
  });
});

describe("the workspace of a create, from the query string or the body", () => {
  async function setUp() {
    const deps = memoryDeps(Date.now(), { host: scriptedHost().host });
    const { apiKey, workspace } = await accountIn(deps, "ada");
    const other = await accountIn(deps, "bob");
    const post = (route: Parameters<typeof createHttpHandler>[0], query: Record<string, string>, body: object | null) =>
      invoke(
        route,
        deps,
        eventFor({
          authorization: `Bearer ${apiKey}`,
          requestContext: { ...recorded.requestContext, http: { ...recorded.requestContext.http, method: "POST" } },
          headers: { ...recorded.headers, authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          queryStringParameters: query,
          body: JSON.stringify(body),
        }),
      );
    return { post, own: workspace.id, foreign: other.workspace.id };
  }

  it("answers 404 for another account's org_id in the query string, never creating in the caller's workspace", async () => {
    const { post, foreign } = await setUp();
    for (const [route, body] of [
      [createSource, { component_code: "code" }],
      [createComponent, { component_code: "code" }],
      [createWebhook, { url: "http://127.0.0.1:9000/" }],
    ] as const) {
      const result = await post(route, { org_id: foreign }, body);
      expect([route.name, result.statusCode]).toEqual([route.name, 404]);
      expect(json(result).error).toBe("workspace not found");
    }
  });

  it("creates in the org_id of the query or the body; the two must agree", async () => {
    const { post, own, foreign } = await setUp();
    const fromQuery = await post(createSource, { org_id: own }, { component_code: "code" });
    expect(json(fromQuery).data.owner_id).toBe(own);
    const fromBody = await post(createSource, {}, { component_code: "code", org_id: own });
    expect(json(fromBody).data.owner_id).toBe(own);
    const disagreeing = await post(createSource, { org_id: own }, { component_code: "code", org_id: foreign });
    expect(disagreeing.statusCode).toBe(400);
    expect(json(disagreeing).details[0].field).toBe("org_id");
  });

  it("checks a JSON null body as a body, not as none: 400, nothing made", async () => {
    const { post } = await setUp();
    for (const route of [createSource, createWebhook]) {
      const result = await post(route, {}, null);
      expect([route.name, result.statusCode, json(result).details?.[0]?.field]).toEqual([route.name, 400, "body"]);
    }
  });
});

describe("the request line of a route's Lambda (logRequests)", () => {
  async function logged(deps: Deps, event: HttpEvent, logRequests: boolean) {
    const lines: Record<string, unknown>[] = [];
    deps.log = jsonLogger({}, (line) => lines.push(JSON.parse(line)));
    const handler = createHttpHandler(getWorkspace, async () => deps, { logRequests });
    const result = await handler(event, { awsRequestId: "ctx-id" } as never);
    return { result, requests: lines.filter((line) => line.message === "request") };
  }

  it("logs method, path without the query, status, duration and request id, and no header", async () => {
    const deps = memoryDeps();
    const { apiKey, workspace } = await accountIn(deps, "ada");
    const event = eventFor({
      authorization: `Bearer ${apiKey}`,
      pathParameters: { workspace_id: workspace.id },
      rawQueryString: "include=id,name&token=query-secret",
    });
    const { result, requests } = await logged(deps, event, true);
    expect(result.statusCode).toBe(200);
    expect(requests).toEqual([
      {
        level: "info",
        time: expect.any(String),
        message: "request",
        method: "GET",
        path: recorded.rawPath,
        status: 200,
        duration_ms: expect.any(Number),
        request_id: recorded.requestContext.requestId,
      },
    ]);
    expect(JSON.stringify(requests)).not.toContain(apiKey);
    expect(JSON.stringify(requests)).not.toContain("query-secret");
  });

  it("logs a refused request with its error status", async () => {
    const deps = memoryDeps();
    const { requests } = await logged(deps, eventFor({ authorization: "Bearer wrong-key-0123456789" }), true);
    expect(requests).toEqual([expect.objectContaining({ method: "GET", status: 401 })]);
    expect(JSON.stringify(requests)).not.toContain("wrong-key-0123456789");
  });

  it("logs nothing of its own when local mode's server logs the request", async () => {
    const deps = memoryDeps();
    const { requests } = await logged(deps, eventFor({ authorization: "Bearer wrong-key-0123456789" }), false);
    expect(requests).toEqual([]);
  });
});

describe("the deadline a route must answer by", () => {
  /** A public route that answers the deadline it was given. */
  const deadline = defineRoute({
    name: "deadline",
    method: "GET",
    path: "/v1/deadline",
    summary: "test",
    auth: false,
    access: {},
    response: z.unknown(),
    run: async (_deps, { answerByMs }) => ({ data: { answerByMs: answerByMs ?? null } }),
  });

  it("is the sooner of the function's end and API Gateway's, from Lambda's context and the event", async () => {
    const deps = memoryDeps();
    const now = deps.clock.nowMs();
    const handler = createHttpHandler(deadline, async () => deps);
    // API Gateway received the request 10 s ago (a cold start): its 29 s end first.
    // The recorded event's query filters fields: none here.
    const event = eventFor({ queryStringParameters: {}, rawQueryString: "" });
    event.requestContext = { ...event.requestContext, timeEpoch: now - 10_000 };
    const context = { awsRequestId: "ctx-id", getRemainingTimeInMillis: () => 29_000 };
    const result = await handler(event, context as never);
    expect(json(result).data).toEqual({ answerByMs: now - 10_000 + API_GATEWAY_LIMIT_MS - ANSWER_MARGIN_MS });
    // Without Lambda's context (local mode), none.
    const local = eventFor({ queryStringParameters: {}, rawQueryString: "" });
    expect(json(await invoke(deadline, deps, local)).data).toEqual({ answerByMs: null });
  });

  it("is what PUT /v1/sources/{id} spends: a hook that does not fit goes to the deploy finisher", async () => {
    const { host, calls } = scriptedHost({ hooks: ["activate", "deactivate"] });
    const deps = memoryDeps(Date.UTC(2026, 10, 27), {
      host,
      timers: { schedule: async () => {}, cancel: async () => {} },
    });
    const handedOver: string[] = [];
    deps.deployFinisher = { finishLater: async (id) => void handedOver.push(id) };
    // The default limit: no hook fits in API Gateway's 30 s.
    deps.runtime = { ...deps.runtime, invocationTimeoutMs: 30_000 };
    const { apiKey, user } = await accountIn(deps, "ada");
    const made = await deploySource(deps, { userId: user.id }, { component_code: "code" });
    calls.length = 0;
    const event = eventFor({
      routeKey: "PUT /v1/sources/{id}",
      rawPath: `/v1/sources/${made.id}`,
      rawQueryString: "",
      queryStringParameters: {},
      pathParameters: { id: made.id },
      requestContext: {
        ...recorded.requestContext,
        http: { ...recorded.requestContext.http, method: "PUT", path: `/v1/sources/${made.id}` },
        timeEpoch: deps.clock.nowMs(),
      },
      headers: { ...recorded.headers, authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "renamed" }),
    });
    const handler = createHttpHandler(updateSource, async () => deps);
    const result = await handler(event, { awsRequestId: "ctx-id", getRemainingTimeInMillis: () => 29_000 } as never);
    expect(result.statusCode, result.body).toBe(200);
    expect(json(result).data).toMatchObject({ name: "renamed", deploy_state: "deploying", deploy_step: "deactivate" });
    expect(calls).toEqual([]);
    expect(handedOver).toEqual([made.id]);
  });
});
