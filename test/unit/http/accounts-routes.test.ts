import { readFileSync } from "node:fs";
import { beforeEach, describe, expect, it } from "vitest";
import { loadAppCatalog } from "#adapters/app-catalog-files";
import { DEFAULT_REGISTRY_DIR } from "#adapters/registry-files";
import { parseAppsFile } from "#core/app-catalog-file";
import { createConnectedAccount } from "#core/connected-accounts";
import { staticAppCatalog } from "#core/ports/app-catalog";
import type { Logger } from "#core/ports/logger";
import { createHttpHandler, type HttpEvent } from "#http/pipeline";
import type { AnyRoute } from "#http/route";
import { routes } from "#http/routes";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { sourceRecord } from "../../support/source-record.ts";
import { workflowRecord } from "../../support/workflow-record.ts";

/**
 * The app catalog and connected account routes through the real middy stack (validation, error
 * shapes, the request log) on memoryDeps, with the shipped catalog plus an OAuth app.
 */

const recorded: HttpEvent = JSON.parse(
  readFileSync(new URL("../../fixtures/api-gateway/get-workspace.json", import.meta.url), "utf8"),
);

const CLIENT_SECRET = "client-secret-never-shown";
const API_KEY = "sk-live-0123456789-very-secret";
const PASSWORD = "pg-password-very-secret";

const oauthApps = parseAppsFile(
  JSON.stringify({
    apps: [
      {
        name_slug: "acme",
        name: "Acme",
        auth_type: "oauth",
        fields: ["region"],
        oauth: {
          authorize_url: "http://127.0.0.1:9/authorize",
          token_url: "http://127.0.0.1:9/token",
          scopes: ["read"],
          client_id: "acme-client-id",
          client_secret: CLIENT_SECRET,
        },
      },
    ],
  }),
  "test",
);
const catalog = staticAppCatalog([...loadAppCatalog(DEFAULT_REGISTRY_DIR).list(), ...oauthApps]);

const byName = (name: string): AnyRoute => {
  const route = routes.find((candidate) => candidate.name === name);
  if (!route) throw new Error(`no route ${name}`);
  return route;
};

interface Answer {
  status: number;
  json: any;
  text: string;
}

function setup() {
  const lines: string[] = [];
  const logger: Logger = {
    debug: (message, fields) => lines.push(JSON.stringify({ message, ...fields })),
    info: (message, fields) => lines.push(JSON.stringify({ message, ...fields })),
    warn: (message, fields) => lines.push(JSON.stringify({ message, ...fields })),
    error: (message, fields) => lines.push(JSON.stringify({ message, ...fields })),
    child: () => logger,
  };
  const deps = memoryDeps(undefined, { apps: catalog });
  deps.log = logger;
  const call = async (
    key: string,
    name: string,
    request: { params?: Record<string, string>; query?: Record<string, string>; body?: unknown; rawBody?: string } = {},
  ): Promise<Answer> => {
    const route = byName(name);
    const path = route.path.replace(/\{(\w+)\}/g, (_, hole: string) => request.params?.[hole] ?? "");
    const body = request.rawBody ?? (request.body === undefined ? undefined : JSON.stringify(request.body));
    const event: HttpEvent = {
      ...structuredClone(recorded),
      routeKey: `${route.method} ${route.path}`,
      rawPath: path,
      rawQueryString: new URLSearchParams(request.query ?? {}).toString(),
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      queryStringParameters: request.query,
      pathParameters: request.params,
      body,
      requestContext: { ...recorded.requestContext, http: { ...recorded.requestContext.http, method: route.method } },
    } as HttpEvent;
    const result = await createHttpHandler(route, async () => deps, { logRequests: true })(event, {
      awsRequestId: "ctx",
    } as never);
    return { status: result.statusCode, json: JSON.parse(result.body), text: result.body };
  };
  return { deps, call, lines };
}

describe("GET /v1/apps and /v1/apps/{id}", () => {
  it("lists the catalog by slug, pages forward and filters by slug or name", async () => {
    const { deps, call } = setup();
    const { apiKey } = await accountIn(deps, "ada");
    const first = await call(apiKey, "list-apps", { query: { limit: "2" } });
    expect(first.status).toBe(200);
    expect(first.json.data.map((app: { name_slug: string }) => app.name_slug)).toEqual(["acme", "data_stores"]);
    expect(first.json.page_info).toMatchObject({ count: 2, total_count: catalog.list().length });
    const next = await call(apiKey, "list-apps", { query: { limit: "1", after: first.json.page_info.end_cursor } });
    expect(next.json.data[0].name_slug).toBe("formatting");
    const postgres = await call(apiKey, "list-apps", { query: { q: "Postgre" } });
    expect(postgres.json.data).toEqual([
      expect.objectContaining({
        name_slug: "postgresql",
        auth_type: "keys",
        required_fields: ["host", "port", "user", "password", "database"],
      }),
    ]);
    expect((await call(apiKey, "list-apps", { query: { query: "git" } })).json.data[0].name_slug).toBe("github");
  });

  it("shows one app by slug or app_ id, never its OAuth client secret or client id", async () => {
    const { deps, call } = setup();
    const { apiKey } = await accountIn(deps, "ada");
    const bySlug = await call(apiKey, "get-app", { params: { id: "acme" } });
    expect(bySlug.status).toBe(200);
    expect(bySlug.json.data).toEqual({
      id: oauthApps[0]?.id,
      name_slug: "acme",
      name: "Acme",
      auth_type: "oauth",
      fields: ["region"],
      required_fields: [],
      oauth_scopes: ["read"],
      has_test_request: false,
    });
    expect((await call(apiKey, "get-app", { params: { id: bySlug.json.data.id } })).json).toEqual(bySlug.json);
    const listed = await call(apiKey, "list-apps", { query: { limit: "100" } });
    for (const text of [bySlug.text, listed.text]) {
      expect(text).not.toContain(CLIENT_SECRET);
      expect(text).not.toContain("acme-client-id");
    }
    const missing = await call(apiKey, "get-app", { params: { id: "nope" } });
    expect(missing).toMatchObject({ status: 404, json: { error: "app not found" } });
  });
});

describe("connected accounts of key apps", () => {
  let env: ReturnType<typeof setup>;
  let key: string;
  let workspaceId: string;
  beforeEach(async () => {
    env = setup();
    const ada = await accountIn(env.deps, "ada");
    key = ada.apiKey;
    workspaceId = ada.workspace.id;
  });

  it("creates an account of a key app, answers its metadata, and its credentials only on request", async () => {
    const created = await env.call(key, "create-account", {
      body: { app: "openai", name: "Work key", credentials: { api_key: API_KEY } },
    });
    expect(created.status, created.text).toBe(200);
    const openai = catalog.find("openai");
    expect(created.json.data).toEqual({
      id: expect.stringMatching(/^apn_/),
      name: "Work key",
      app: { id: openai?.id, name: "OpenAI" },
      created_at: "2026-11-20T12:00:00.000Z",
      updated_at: "2026-11-20T12:00:00.000Z",
      healthy: true,
    });
    const id = created.json.data.id;
    const plain = await env.call(key, "get-account", { params: { id } });
    expect(plain.json).toEqual(created.json);
    expect(plain.text).not.toContain(API_KEY);
    const full = await env.call(key, "get-account", { params: { id }, query: { include_credentials: "1" } });
    expect(full.json.data).toEqual({ ...created.json.data, expires_at: null, credentials: { api_key: API_KEY } });
    // By app_ id too, and the name defaults to the app's.
    const byId = await env.call(key, "create-account", { body: { app: openai?.id, credentials: { api_key: "k2" } } });
    expect(byId.json.data.name).toBe("OpenAI");
  });

  it("requires the app's fields but its optional ones, and refuses others, naming the field", async () => {
    const postgres = { host: "127.0.0.1", port: 5432, user: "sluice", password: PASSWORD, database: "db" };
    const ok = await env.call(key, "create-account", { body: { app: "postgresql", credentials: postgres } });
    expect(ok.status, ok.text).toBe(200);
    const cases: Array<[unknown, string]> = [
      [{ app: "postgresql", credentials: { ...postgres, bogus: PASSWORD } }, "credentials.bogus"],
      [{ app: "postgresql", credentials: { ...postgres, database: undefined } }, "credentials.database"],
      [{ app: "openai" }, "credentials"],
      [{ app: "openai", credentials: { api_key: "x".repeat(16 * 1024 + 1) } }, "credentials.api_key"],
      [{ app: "openai", credentials: { api_key: { nested: PASSWORD } } }, "credentials.api_key"],
      [{ app: "nope", credentials: { api_key: PASSWORD } }, "app"],
      [{ app: "openai", name: "", credentials: { api_key: PASSWORD } }, "name"],
    ];
    for (const [body, field] of cases) {
      const answer = await env.call(key, "create-account", { body });
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json.details.map((d: { field: string }) => d.field)).toEqual([field]);
      expect(answer.text).not.toContain(PASSWORD);
    }
  });

  it("refuses hostile credentials and apps with a 400 that names no value and stores nothing", async () => {
    const raw = (credentials: string, app = '"openai"') =>
      env.call(key, "create-account", { rawBody: `{"app": ${app}, "credentials": ${credentials}}` });
    const hostile: Array<[Promise<Answer>, RegExp]> = [
      // A prototype key: never a field, never the object's prototype, never echoed with its value.
      [raw(`{"api_key": "k", "__proto__": {"api_key": "${PASSWORD}"}}`), /^credentials\.__proto__/],
      [raw(`{"__proto__": "${PASSWORD}"}`), /^credentials\.__proto__/],
      [raw(`{"api_key": "k", "constructor": "${PASSWORD}"}`), /^credentials\.constructor: is not a field/],
      [raw(`{"api_key": "k", "toString": "${PASSWORD}"}`), /^credentials\.toString: is not a field/],
      [raw(`{"api_key": "k"}`, '"__proto__"'), /^app: is not an app/],
      [raw(`{"api_key": "k"}`, '"constructor"'), /^app: is not an app/],
      [raw(`{"api_key": ["${PASSWORD}"]}`), /^credentials\.api_key: must be a string/],
      [raw(`{"api_key": 1e400}`), /^credentials\.api_key/],
      [
        raw(JSON.stringify(Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`f${i}`, PASSWORD])))),
        /^credentials\.f0/,
      ],
      [raw(`{"api_key": "k", "\\u0000${PASSWORD}": "v"}`), /^credentials: has a key that is not a field/],
    ];
    for (const [pending, message] of hostile) {
      const answer = await pending;
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json.error).toMatch(message);
      expect(answer.text).not.toContain(PASSWORD);
    }
    const named = await env.call(key, "create-account", {
      body: { app: "openai", name: "evil\u001b[31mname\u202e", credentials: { api_key: "k" } },
    });
    expect(named.status, named.text).toBe(400);
    expect((await env.call(key, "list-user-accounts")).json.data).toEqual([]);
    expect(env.lines.join("\n")).not.toContain(PASSWORD);
  });

  it("sends OAuth apps to the connect route, and refuses apps that need no account", async () => {
    const oauth = await env.call(key, "create-account", { body: { app: "acme", credentials: {} } });
    expect(oauth.status).toBe(400);
    expect(oauth.json.error).toContain("POST /v1/accounts/connect");
    const none = await env.call(key, "create-account", { body: { app: "http", credentials: {} } });
    expect(none.status).toBe(400);
    expect(none.json.error).toMatch(/^app: needs no account/);
  });

  it("never repeats credentials from a malformed body, and never logs them", async () => {
    const malformed = await env.call(key, "create-account", {
      rawBody: `{"app": "openai", "credentials": {"api_key": ${API_KEY}}}`,
    });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error).toMatch(/^request body is not valid JSON/);
    expect(malformed.text).not.toContain("sk-live");
    const created = await env.call(key, "create-account", {
      body: { app: "openai", credentials: { api_key: API_KEY } },
    });
    await env.call(key, "get-account", { params: { id: created.json.data.id }, query: { include_credentials: "1" } });
    await env.call(key, "update-account", {
      params: { id: created.json.data.id },
      body: { credentials: { api_key: API_KEY, bogus: PASSWORD } },
    });
    expect(env.lines.filter((line) => line.includes('"request"')).length).toBe(4);
    expect(env.lines.join("\n")).not.toContain("very-secret");
  });

  it("renames an account and replaces its keys; another writer's change is retried, a lasting race is a 409", async () => {
    const created = await env.call(key, "create-account", { body: { app: "openai", credentials: { api_key: "old" } } });
    const id = created.json.data.id;
    env.deps.clock.set(Date.UTC(2026, 10, 21));
    const renamed = await env.call(key, "update-account", { params: { id }, body: { name: "Renamed" } });
    expect(renamed.json.data).toMatchObject({ name: "Renamed", updated_at: "2026-11-21T00:00:00.000Z" });
    const refused = await env.call(key, "update-account", { params: { id }, body: { credentials: { other: "x" } } });
    expect(refused.status).toBe(400);
    expect(refused.json.details[0].field).toBe("credentials.other");
    // Another writer bumps the version between the read and the write, once.
    const store = env.deps.appAccounts;
    const update = store.update.bind(store);
    let races = 1;
    store.update = async (record, expected) => {
      if (races-- > 0) {
        const current = await store.get(record.id);
        if (current) await update({ ...current, version: current.version + 1 }, current.version);
      }
      return update(record, expected);
    };
    const replaced = await env.call(key, "update-account", {
      params: { id },
      body: { credentials: { api_key: "new" } },
    });
    expect(replaced.status, replaced.text).toBe(200);
    const read = await env.call(key, "get-account", { params: { id }, query: { include_credentials: "1" } });
    expect(read.json.data).toMatchObject({ name: "Renamed", credentials: { api_key: "new" } });
    store.update = async () => false;
    const lost = await env.call(key, "update-account", { params: { id }, body: { name: "Again" } });
    expect(lost.status).toBe(409);
    expect(lost.json.error).toContain("try again");
  });

  it("refuses to delete an account that sources or workflows use, listing them, unless forced", async () => {
    const ada = { user: { id: "" }, workspace: { id: workspaceId }, project: { id: "proj_x" } };
    const created = await env.call(key, "create-account", { body: { app: "openai", credentials: { api_key: "k" } } });
    const id = created.json.data.id;
    await env.deps.sources.createSource({
      ...sourceRecord(ada, "dc_01kab00000uses0account0"),
      configuredProps: { openai: { authProvisionId: id } },
    });
    await env.deps.sources.createSource({
      ...sourceRecord(ada, "dc_01kab00000other0account"),
      nameSlug: "other",
      configuredProps: { openai: { authProvisionId: "apn_other" } },
    });
    await env.deps.workflows.createWorkflow({
      ...workflowRecord(ada, "p_01kab00000uses0account0"),
      steps: [
        {
          id: "c_1",
          namespace: "ask",
          disabled: false,
          origin: "code",
          componentId: "sc_1",
          configuredProps: { openai: { authProvisionId: id } },
        },
      ],
    });
    const refused = await env.call(key, "delete-account", { params: { id } });
    expect(refused.status).toBe(409);
    expect(refused.json.error).toBe(
      `account ${id} is used by source dc_01kab00000uses0account0 (feed), workflow p_01kab00000uses0account0 (flow): configure them without it, or delete with force=true`,
    );
    expect((await env.call(key, "get-account", { params: { id } })).status).toBe(200);
    const forced = await env.call(key, "delete-account", { params: { id }, query: { force: "true" } });
    expect(forced.json).toEqual({ data: { id, deleted: true } });
    expect((await env.call(key, "get-account", { params: { id } })).status).toBe(404);
    const unused = await env.call(key, "create-account", { body: { app: "openai", credentials: { api_key: "k" } } });
    expect((await env.call(key, "delete-account", { params: { id: unused.json.data.id } })).status).toBe(200);
  });

  it("lists a workspace's accounts as {id, name} by creation, filtered by app slug or app_ id, paged forward", async () => {
    const made: string[] = [];
    for (const [app, credentials] of [
      ["openai", { api_key: "1" }],
      ["postgresql", { host: "h", port: 1, user: "u", password: "p", database: "d" }],
      ["openai", { api_key: "2" }],
    ] as const) {
      env.deps.clock.set(env.deps.clock.nowMs() + 1000);
      made.push((await env.call(key, "create-account", { body: { app, credentials } })).json.data.id);
    }
    const all = await env.call(key, "list-workspace-accounts", { params: { workspace_id: workspaceId } });
    expect(all.json.data).toEqual([
      { id: made[0], name: "OpenAI" },
      { id: made[1], name: "PostgreSQL" },
      { id: made[2], name: "OpenAI" },
    ]);
    const openaiId = catalog.find("openai")?.id ?? "";
    const page = await env.call(key, "list-workspace-accounts", {
      params: { workspace_id: workspaceId },
      query: { query: openaiId, limit: "1" },
    });
    expect(page.json).toMatchObject({ data: [{ id: made[0] }], page_info: { total_count: 2, count: 1 } });
    const rest = await env.call(key, "list-workspace-accounts", {
      params: { workspace_id: workspaceId },
      query: { query: "openai", after: page.json.page_info.end_cursor },
    });
    expect(rest.json).toMatchObject({ data: [{ id: made[2] }], page_info: { end_cursor: null } });
    const mine = await env.call(key, "list-user-accounts", { query: { query: "postgresql" } });
    expect(mine.json.data).toEqual([expect.objectContaining({ id: made[1], healthy: true, app: expect.any(Object) })]);
    expect(mine.text).not.toContain('"p"');
  });

  it("answers 404 to another tenant for every account route, exactly as for a missing id", async () => {
    const created = await env.call(key, "create-account", {
      body: { app: "openai", credentials: { api_key: API_KEY } },
    });
    const id = created.json.data.id;
    const missing = "apn_0000000000000000000000";
    const { apiKey: other } = await accountIn(env.deps, "eve");
    for (const [name, request] of [
      ["get-account", { query: { include_credentials: "1" } }],
      ["update-account", { body: { credentials: { bogus: 1 } } }],
      ["delete-account", { query: { force: "true" } }],
    ] as const) {
      const theirs = await env.call(other, name, { params: { id }, ...request });
      const nothing = await env.call(other, name, { params: { id: missing }, ...request });
      expect(theirs.status, `${name}: ${theirs.text}`).toBe(404);
      expect(theirs.json).toEqual(nothing.json);
    }
    const list = await env.call(other, "list-workspace-accounts", { params: { workspace_id: workspaceId } });
    expect(list.status).toBe(404);
    const created2 = await env.call(other, "create-account", {
      body: { app: "openai", credentials: { api_key: "x" }, workspace_id: workspaceId },
    });
    expect(created2.status).toBe(404);
    expect((await env.call(other, "list-user-accounts")).json.data).toEqual([]);
    expect((await env.call(key, "get-account", { params: { id } })).status).toBe(200);
  });
});

describe("connected accounts of OAuth apps", () => {
  it("reads the oauth_* credentials with the catalog's client id, never its secret", async () => {
    const env = setup();
    const ada = await accountIn(env.deps, "ada");
    const app = catalog.find("acme");
    if (!app) throw new Error("no acme");
    const expiresAt = Date.UTC(2026, 10, 20, 13);
    const account = await createConnectedAccount(env.deps, {
      workspaceId: ada.workspace.id,
      ownerId: ada.user.id,
      app,
      credentials: { oauth_access_token: "at", oauth_refresh_token: "rt", oauth_uid: "ada@acme", region: "eu" },
      expiresAt,
    });
    const read = await env.call(ada.apiKey, "get-account", {
      params: { id: account.id },
      query: { include_credentials: "1" },
    });
    expect(read.json.data).toMatchObject({
      expires_at: "2026-11-20T13:00:00.000Z",
      credentials: {
        oauth_access_token: "at",
        oauth_client_id: "acme-client-id",
        oauth_refresh_token: "rt",
        oauth_uid: "ada@acme",
        region: "eu",
      },
    });
    expect(read.text).not.toContain(CLIENT_SECRET);
    const replaced = await env.call(ada.apiKey, "update-account", {
      params: { id: account.id },
      body: { credentials: { region: "us" } },
    });
    expect(replaced.status).toBe(400);
    expect(replaced.json.error).toContain("POST /v1/accounts/connect");
  });
});
