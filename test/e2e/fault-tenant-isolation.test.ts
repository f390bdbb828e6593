import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AnyRoute } from "#http/route";
import { routes } from "#http/routes";
import { eventually } from "../support/eventually.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { type StandInOAuthProvider, startStandInOAuthProvider } from "../support/oauth-provider.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

/**
 * Issue 6's fault test "tenant isolation", against `npm start`: user 1 (the first account) makes
 * one of every resource; user 2 is made with `sluice create-user` while the server runs. Then, for
 * every route of the route table that takes an id, user 2 with user 1's id gets 404 with the error
 * shape, exactly the answer for an id that does not exist; every list user 2 can call holds
 * nothing of user 1's; and afterwards nothing of user 1's changed, through the API and in the file.
 *
 * The routes are read from the table (functions/http/routes.ts), so a new route is covered without
 * editing this test. A path id is filled from the samples below by the path segment before it
 * (`/sources/{id}` takes `sources`); a route whose placeholder has no sample fails the test. Ids in
 * a query or body (`emitter_id`, `workspace_id`...) need a request in CROSS_REQUESTS naming them,
 * else the test fails too.
 */

const ROOT_USER = { username: "tenant-one", email: "one@tenant.example" };
const SECOND_USER = { username: "tenant-two", email: "two@tenant.example" };
const COMPONENT_KEY = "tenant-one-probe";
/** In user 1's event data: no answer to user 2 may contain it. */
const MARKER = `marker-${randomBytes(6).toString("hex")}`;

const probeCode = (key: string) => `
export default {
  key: "${key}",
  name: "Isolation probe",
  version: "0.1.0",
  props: { http: { type: "$.interface.http" }, dataStore: { type: "data_store" } },
  async run(event) {
    await this.dataStore.set("last", event.body);
    this.$emit(event.body, { summary: "probe" });
  },
};
`;

/** A code step and two triggers: a workflow of each kind of part this step stores. */
const WORKFLOW_BODY = {
  settings: { name: "probe flow" },
  steps: [
    {
      namespace: "probe",
      component_code: "export default defineComponent({ async run({ steps }) { return steps.trigger } })",
    },
  ],
  triggers: [{ type: "http" }, { type: "timer", props: { intervalSeconds: 3600 } }],
};

/** An action and a source that read an `openai` account's `$auth`: user 2 configures them with user 1's accounts. */
const APP_ACTION = `export default {
  key: "tenant-two-app", name: "App probe", version: "0.1.0", type: "action",
  props: { openai: { type: "app", app: "openai" } },
  async run() { return this.openai.$auth.api_key },
};`;
const APP_SOURCE = `export default {
  key: "tenant-two-app-source", name: "App source probe", version: "0.1.0",
  props: { openai: { type: "app", app: "openai" }, http: { type: "$.interface.http" } },
  async run() { this.$emit({ key: this.openai.$auth.api_key }) },
};`;

/** An account of the shipped key app `openai`; its key must never reach user 2. */
const ACCOUNT_BODY = { app: "openai", name: "probe key", credentials: { api_key: `sk-${MARKER}` } };

/**
 * Routes whose path names something every caller shares (the app catalog), not a tenant's
 * resource: the same answer for everyone, so not probed for a 404.
 */
const SHARED_ROUTES = new Set(["get-app"]);

/** A well-formed id (or key, or event id) of the same kind that nothing has. */
function missingTwin(value: string): string {
  const id = /^([a-z]+_)[0-9a-z]{22}$/.exec(value);
  if (id) return `${id[1]}${"0".repeat(22)}`;
  if (/^\d+-\d+$/.test(value)) return "1-0";
  return `${value}-missing`;
}

/** The samples of a path placeholder, by the path segment before it. */
type Samples = Record<string, string[]>;

interface Answer {
  status: number;
  json: any;
  text: string;
}

interface Tenant {
  key: string;
  userId: string;
  workspaceId: string;
  projectId: string;
  componentId: string;
  sourceId: string;
  endpointUrl: string;
  webhookId: string;
  workflowId: string;
  /** The key of the workflow's HTTP trigger. */
  workflowKey: string;
  deadLetterId: string;
  eventId: string;
  /** The probe source's own data store, holding the payload. */
  dataStoreId: string;
  /** What `GET /users/me/subscriptions` listed after setup. */
  subscriptionIds: string[];
  autoSubscriptionId: string;
  /** A connected account of a key app (the shipped `openai`). */
  accountId: string;
  /** A connected account (`apn_`) of the stand-in OAuth app. */
  oauthAccountId: string;
}

/** A request of user 2 that names user 1's ids in its query or body (path ids are user 2's own). */
interface CrossRequest {
  query?: Record<string, string>;
  body?: Record<string, unknown>;
  /** @default 404 */
  status?: number;
  /** The answer equals the one for the same request with user 1's ids swapped for missing ones. @default true */
  sameAsMissing?: boolean;
}

interface Fixture {
  one: Tenant;
  two: Tenant;
  /** Two more workflows of user 1's, with a subscription between them. */
  oneWorkflows: [string, string];
  deadUrl: string;
}

/**
 * Requests with ids in the query or body, per route name. Sources, webhooks and workspaces of
 * another account are 404; a `component_id` in a body is a field of the request, so an unknown
 * one (another account's included) is a 400 naming it, as sources.test.ts expects.
 */
const CROSS_REQUESTS: Record<string, (f: Fixture) => CrossRequest[]> = {
  "create-source": ({ one }): CrossRequest[] => [
    { body: { component_id: one.componentId }, status: 400 },
    { body: { component_code: probeCode("tenant-two-probe"), workspace_id: one.workspaceId } },
    { query: { org_id: one.workspaceId }, body: { component_code: probeCode("tenant-two-probe") } },
  ],
  // A component is its user's; a workspace it names must still be the caller's.
  "create-component": ({ one }): CrossRequest[] => [
    { query: { org_id: one.workspaceId }, body: { component_code: probeCode("tenant-two-probe") } },
    { body: { component_code: probeCode("tenant-two-probe"), workspace_id: one.workspaceId } },
  ],
  "update-source": ({ one }): CrossRequest[] => [{ body: { component_id: one.componentId }, status: 400 }],
  // Nothing is kept (no authorization starts) for another account's workspace.
  "connect-account": ({ one }): CrossRequest[] => [
    { body: { app: "standin", workspace_id: one.workspaceId } },
    { body: { app: "standin", org_id: one.workspaceId } },
    { query: { org_id: one.workspaceId }, body: { app: "standin" } },
  ],
  // Dynamic props: user 1's component is 404 like a missing one; a workspace named must be the
  // caller's; `dynamic_props_id` and `external_user_id` are accepted and unused (the answer of the
  // configure call carries timestamps, so it is not compared with the missing-id one).
  "configure-component-prop": ({ one }): CrossRequest[] => [
    { body: { id: one.componentId, prop_name: "http" } },
    { body: { id: "tenant-two-probe", prop_name: "http", org_id: one.workspaceId } },
    { body: { id: "tenant-two-probe", prop_name: "http", workspace_id: one.workspaceId } },
    {
      body: { id: "tenant-two-probe", prop_name: "http", dynamic_props_id: one.sourceId, external_user_id: one.userId },
      status: 200,
      sameAsMissing: false,
    },
  ],
  // The Connect path form: the path's project fixes the workspace (user 2's own here), so a body
  // naming another one is a 400, for user 1's workspace as for a missing one.
  "connect-configure-component-prop": ({ one }): CrossRequest[] => [
    { body: { id: one.componentId, prop_name: "http" } },
    { body: { id: "tenant-two-probe", prop_name: "http", org_id: one.workspaceId }, status: 400 },
    { body: { id: "tenant-two-probe", prop_name: "http", workspace_id: one.workspaceId }, status: 400 },
    {
      body: { id: "tenant-two-probe", prop_name: "http", dynamic_props_id: one.sourceId, external_user_id: one.userId },
      status: 200,
      sameAsMissing: false,
    },
  ],
  // The run action: user 1's component is 404 like a missing one; the project fixes the workspace.
  // `dynamic_props_id` and `external_user_id` are accepted and unused (user 2's own component here
  // is a source, which the run action refuses with a 400); any `stash_id` is refused.
  "connect-run-action": ({ one }): CrossRequest[] => [
    { body: { id: one.componentId } },
    { body: { id: "tenant-two-probe", org_id: one.workspaceId }, status: 400 },
    { body: { id: "tenant-two-probe", workspace_id: one.workspaceId }, status: 400 },
    {
      body: { id: "tenant-two-probe", dynamic_props_id: one.sourceId, external_user_id: one.userId },
      status: 400,
      sameAsMissing: false,
    },
    { body: { id: "tenant-two-probe", stash_id: one.sourceId }, status: 400, sameAsMissing: false },
  ],
  "connect-reload-component-props": ({ one }): CrossRequest[] => [
    { body: { id: one.componentId } },
    { body: { id: "tenant-two-probe", org_id: one.workspaceId }, status: 400 },
    { body: { id: "tenant-two-probe", workspace_id: one.workspaceId }, status: 400 },
    { body: { id: "tenant-two-probe", dynamic_props_id: one.sourceId, external_user_id: one.userId }, status: 200 },
  ],
  "reload-component-props": ({ one }): CrossRequest[] => [
    { body: { id: one.componentId } },
    { body: { id: "tenant-two-probe", org_id: one.workspaceId } },
    { body: { id: "tenant-two-probe", workspace_id: one.workspaceId } },
    { body: { id: "tenant-two-probe", dynamic_props_id: one.sourceId, external_user_id: one.userId }, status: 200 },
  ],
  // user 2's own source with user 1's event ids: accepted, and deletes nothing of user 1's (checked
  // at the end). The answer echoes the ids, so it differs from the one with missing ids.
  "delete-source-events": ({ one }): CrossRequest[] => [
    { query: { start_id: one.eventId, end_id: one.eventId }, status: 202, sameAsMissing: false },
  ],
  "create-webhook": ({ one, deadUrl }): CrossRequest[] => [
    { query: { url: deadUrl, workspace_id: one.workspaceId } },
    { query: { url: deadUrl, org_id: one.workspaceId } },
  ],
  "create-subscription": ({ one, two, oneWorkflows }): CrossRequest[] => [
    { query: { emitter_id: one.sourceId, listener_id: two.webhookId } },
    { query: { emitter_id: one.sourceId, listener_id: two.sourceId, event_name: "$errors" } },
    { query: { emitter_id: two.sourceId, listener_id: one.webhookId } },
    { query: { emitter_id: two.sourceId, listener_id: one.sourceId } },
    { query: { emitter_id: "dc_*", listener_id: one.webhookId } },
    { query: { emitter_id: one.workspaceId, listener_id: two.webhookId, event_name: "$errors" } },
    { query: { emitter_id: one.workflowId, listener_id: two.webhookId } },
    { query: { emitter_id: two.sourceId, listener_id: one.workflowId } },
    { query: { emitter_id: two.sourceId, listener_id: two.workflowId, workspace_id: one.workspaceId } },
    { query: { emitter_id: two.sourceId, listener_id: two.workflowId, org_id: one.workspaceId } },
    { query: { emitter_id: two.sourceId, listener_id: two.webhookId, org_id: one.workspaceId } },
    // The subscription user 1 made between two workflows: 404, and not user 1's subscription.
    { query: { emitter_id: oneWorkflows[0], listener_id: oneWorkflows[1], event_name: "$errors" } },
  ],
  "delete-subscription": ({ one, oneWorkflows }): CrossRequest[] => [
    { query: { emitter_id: one.sourceId, listener_id: one.webhookId, event_name: "" } },
    { query: { emitter_id: one.sourceId, listener_id: one.webhookId, event_name: "$errors" } },
    {
      query: {
        emitter_id: oneWorkflows[0],
        listener_id: oneWorkflows[1],
        event_name: "$errors",
        workspace_id: one.workspaceId,
      },
    },
    {
      query: {
        emitter_id: oneWorkflows[0],
        listener_id: oneWorkflows[1],
        event_name: "$errors",
        org_id: one.workspaceId,
      },
    },
  ],
  "create-auto-subscription": ({ one, two }): CrossRequest[] => [
    { query: { event_name: "$errors", listener_id: one.webhookId } },
    { query: { event_name: "$logs", listener_id: one.sourceId } },
    { query: { event_name: "$errors", listener_id: one.workflowId } },
    { query: { event_name: "$errors", listener_id: two.workflowId, workspace_id: one.workspaceId } },
    { query: { event_name: "$errors", listener_id: two.workflowId, org_id: one.workspaceId } },
    { query: { event_name: "$logs", listener_id: two.webhookId, org_id: one.workspaceId } },
  ],
  // Nothing is saved before these are refused: triggers and ids are checked before any step's code.
  "create-workflow": ({ one }): CrossRequest[] => [
    { body: { ...WORKFLOW_BODY, org_id: one.workspaceId } },
    { body: { ...WORKFLOW_BODY, workspace_id: one.workspaceId } },
    { query: { org_id: one.workspaceId }, body: WORKFLOW_BODY },
    { body: { ...WORKFLOW_BODY, project_id: one.projectId }, status: 400 },
    { body: { ...WORKFLOW_BODY, template_id: one.workflowId }, status: 400 },
    {
      body: { ...WORKFLOW_BODY, triggers: [{ type: "source", props: { source_id: one.sourceId } }] },
      status: 400,
    },
    { body: { steps: [{ namespace: "theirs", component_id: one.componentId }] }, status: 400 },
  ],
  "get-workflow": ({ one }): CrossRequest[] => [{ query: { org_id: one.workspaceId } }],
  "create-account": ({ one }): CrossRequest[] => [
    { body: { ...ACCOUNT_BODY, workspace_id: one.workspaceId } },
    { body: { ...ACCOUNT_BODY, org_id: one.workspaceId } },
    { query: { org_id: one.workspaceId }, body: ACCOUNT_BODY },
  ],
  "update-workflow": ({ one }): CrossRequest[] => [
    // Refused whatever it names: a PUT takes no template (decision 537).
    { body: { template_id: one.workflowId }, status: 400 },
    { body: { triggers: [{ type: "source", props: { source_id: one.sourceId } }] }, status: 400 },
    { body: { steps: [{ namespace: "theirs", component_id: one.componentId }] }, status: 400 },
  ],
};

/**
 * The GET routes that answer a client: not the OAuth callback, which answers a browser's redirect
 * with an HTML page and takes no key (its one-time state is checked in test/unit/http/oauth-callback.test.ts).
 */
const apiGets = routes.filter((route) => route.method === "GET" && route.answers !== "html");

/**
 * Placeholders that name no resource: one of a few words of the route (`/v1/connect/{project_id}/
 * {component_kind}/...`: components, actions or triggers), always filled with this one.
 */
const WORDS: Readonly<Record<string, string>> = { component_kind: "actions" };

/** The placeholders of a route's path that name a resource, each with the segment before it. */
function placeholders(path: string) {
  const segments = path.split("/");
  return segments.flatMap((segment, index) => {
    const hole = /^\{(\w+)\}$/.exec(segment);
    if (!hole?.[1] || Object.hasOwn(WORDS, hole[1])) return [];
    // The segment before names what it is; a word placeholder stands for its word (`actions`).
    const before = segments[index - 1] ?? "";
    const word = /^\{(\w+)\}$/.exec(before)?.[1];
    return [
      { name: hole[1], owner: word !== undefined && Object.hasOwn(WORDS, word) ? (WORDS[word] as string) : before },
    ];
  });
}

/** `path` with its resource placeholders filled with `values`, in order, and its words with theirs. */
function fillPath(path: string, values: string[]): string {
  let index = 0;
  return path.replace(/\{(\w+)\}/g, (_, name: string) =>
    Object.hasOwn(WORDS, name) ? (WORDS[name] as string) : encodeURIComponent(values[index++] ?? ""),
  );
}

/** The names of a route's query and body fields. */
function fieldsOf(route: AnyRoute): string[] {
  const shapeOf = (schema: unknown) => Object.keys((schema as { shape?: object } | undefined)?.shape ?? {});
  return [...new Set([...shapeOf(route.query), ...shapeOf(route.body)])];
}

/** The query and body fields of a route that name an id (`*_id`). */
/**
 * Fields that name a resource. `external_id` is not one: it is a name the client chooses within its
 * own workspace, so it cannot reach another account's workflow (test/e2e/workflows-api.test.ts
 * checks that a name another account uses makes the caller's own workflow).
 */
const idFields = (route: AnyRoute) =>
  fieldsOf(route).filter((field) => /(^|_)id$/.test(field) && field !== "external_id");

function expectErrorShape(answer: Answer, what: string) {
  expect(typeof answer.json?.error, `${what}: ${answer.text}`).toBe("string");
  expect(Object.keys(answer.json).filter((key) => !["error", "details", "request_id"].includes(key))).toEqual([]);
  for (const issue of answer.json.details ?? []) {
    expect(issue, what).toEqual({ field: expect.any(String), message: expect.any(String) });
  }
}

/**
 * Every row of every table but the delivery machinery's (queue and outbox rows come and go as
 * work is done), sorted: a 404 must not change any of it.
 */
function databaseSnapshot(dataDir: string) {
  const db = new Database(join(dataDir, "sluice.db"), { readonly: true, fileMustExist: true });
  try {
    const tables = db
      .prepare<[], { name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all()
      .map((row) => row.name)
      .filter((name) => !/deliver|queue|outbox/.test(name));
    return Object.fromEntries(
      tables.map((table) => [
        table,
        db
          .prepare(`SELECT * FROM "${table}"`)
          .all()
          .map((row) => JSON.stringify(row))
          .sort(),
      ]),
    );
  } finally {
    db.close();
  }
}

describe("fault: tenant isolation", () => {
  let sluice: SluiceProcess;
  /** Answers 500 to everything: each delivery ends as a dead letter. */
  let receiver: WebhookReceiver;
  /** The OAuth provider of the app `standin` each user connects an account of. */
  let provider: StandInOAuthProvider;
  /** User 2's components of APP_ACTION and APP_SOURCE. */
  const appComponents = { action: "", source: "" };
  let root: string;
  let fixture: Fixture;
  let oneSamples: Samples;
  let twoSamples: Samples;
  /** Every string of user 1's that user 2 must never see. */
  let oneStrings: string[];
  let oneApiBefore: Record<string, Answer>;
  let oneDbBefore: ReturnType<typeof databaseSnapshot>;
  let twoLists: Record<string, Answer>;

  const call = async (
    key: string,
    method: string,
    path: string,
    options: { query?: Record<string, string>; body?: unknown } = {},
  ): Promise<Answer> => {
    const search = options.query ? `?${new URLSearchParams(options.query)}` : "";
    const response = await fetch(`${root}${path}${search}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, json, text };
  };

  /** The data of a setup request's answer; a failed one fails the setup. */
  const ok = async (answer: Promise<Answer>) => {
    const { status, json, text } = await answer;
    if (status >= 300) throw new Error(`setup request failed: ${status} ${text}`);
    return json.data;
  };

  /** Makes a source with an HTTP interface, a webhook subscribed to it, and one event that dead-letters. */
  async function populate(key: string, componentKey: string, payload: unknown) {
    const me = await ok(call(key, "GET", "/v1/users/me"));
    const workspaceId: string = me.orgs[0].id;
    const [project] = await ok(call(key, "GET", `/v1/workspaces/${workspaceId}/projects`));
    const webhook = await ok(call(key, "POST", "/v1/webhooks", { query: { url: receiver.url(), name: "dead end" } }));
    // Before the source: the auto subscription subscribes it at creation.
    const auto = await ok(
      call(key, "POST", "/v1/auto_subscriptions", { query: { event_name: "$errors", listener_id: webhook.id } }),
    );
    const component = await ok(
      call(key, "POST", "/v1/components", { body: { component_code: probeCode(componentKey) } }),
    );
    const source = await ok(call(key, "POST", "/v1/sources", { body: { component_id: component.id, name: "probe" } }));
    const subscription = await ok(
      call(key, "POST", "/v1/subscriptions", { query: { emitter_id: source.id, listener_id: webhook.id } }),
    );
    const workflow = await ok(call(key, "POST", "/v1/workflows", { body: WORKFLOW_BODY }));
    const account = await ok(call(key, "POST", "/v1/accounts", { body: ACCOUNT_BODY }));
    const endpointUrl: string = source.configured_props.http.endpoint_url;
    const posted = await fetch(endpointUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
    });
    expect(posted.status).toBeLessThan(300);
    const deadLetter = await eventually(async () => {
      const { json } = await call(key, "GET", `/v1/webhooks/${webhook.id}/dead_letters`);
      return json?.data?.[0];
    }, "the delivery to the failing receiver to become a dead letter");
    const [dataStore] = await ok(call(key, "GET", `/v1/workspaces/${workspaceId}/data_stores`));
    const listed = await ok(call(key, "GET", "/v1/users/me/subscriptions", { query: { limit: "100" } }));
    // A connected account: the OAuth flow against the stand-in provider, the test playing the browser.
    const connect = await ok(call(key, "POST", "/v1/accounts/connect", { body: { app: "standin" } }));
    const approved = await fetch(connect.authorize_url, { redirect: "manual" });
    const page = await fetch(approved.headers.get("location") ?? "", { redirect: "manual" });
    const oauthAccountId = /apn_[A-Za-z0-9_-]+/.exec(await page.text())?.[0];
    expect(page.status).toBe(200);
    expect(listed.map((s: { id: string }) => s.id)).toEqual(expect.arrayContaining([subscription.id]));
    return {
      tenant: {
        key,
        userId: me.id as string,
        workspaceId,
        projectId: project.id as string,
        componentId: component.id as string,
        sourceId: source.id as string,
        endpointUrl,
        webhookId: webhook.id as string,
        workflowId: workflow.id as string,
        workflowKey: workflow.triggers[0].key as string,
        deadLetterId: deadLetter.id as string,
        eventId: deadLetter.event_id as string,
        dataStoreId: dataStore.id as string,
        oauthAccountId: oauthAccountId as string,
        subscriptionIds: listed.map((s: { id: string }) => s.id),
        autoSubscriptionId: auto.id as string,
        accountId: account.id as string,
      } satisfies Tenant,
      sourceName: source.name_slug as string,
    };
  }

  /** Every GET route answered for `key`, its placeholders filled with the first of `samples`. */
  async function everyGet(key: string, samples: Samples) {
    const answers: Record<string, Answer> = {};
    for (const route of apiGets) {
      const values = placeholders(route.path).map((hole) => samples[hole.owner]?.[0]);
      if (values.some((value) => value === undefined))
        throw new Error(`no own sample for a placeholder of ${route.path}`);
      const path = fillPath(route.path, values as string[]);
      const paged = fieldsOf(route).includes("limit");
      answers[`${route.name} ${path}`] = await call(key, "GET", path, paged ? { query: { limit: "100" } } : {});
    }
    return answers;
  }

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    receiver.status = 500;
    provider = await startStandInOAuthProvider();
    const appsFile = join(mkdtempSync(join(tmpdir(), "sluice-tenant-apps-")), "apps.json");
    writeFileSync(appsFile, JSON.stringify({ apps: [provider.appEntry("standin")] }));
    sluice = await startSluice({
      env: {
        SLUICE_APPS_FILE: appsFile,
        SLUICE_USERNAME: ROOT_USER.username,
        SLUICE_EMAIL: ROOT_USER.email,
        SLUICE_WEBHOOK_MAX_ATTEMPTS: "1",
      },
    });
    root = sluice.baseUrl.replace(/\/v1$/, "");
    const one = await populate(sluice.apiKeyFromFile(), COMPONENT_KEY, { secret: MARKER });
    const newWorkflow = async () => {
      const answer = await call(one.tenant.key, "POST", "/v1/workflows", { body: WORKFLOW_BODY });
      expect(answer.status, answer.text).toBe(200);
      return answer.json.data.id as string;
    };
    const oneWorkflows: [string, string] = [await newWorkflow(), await newWorkflow()];
    const workflowSubscription = await call(one.tenant.key, "POST", "/v1/subscriptions", {
      query: { emitter_id: oneWorkflows[0], listener_id: oneWorkflows[1], event_name: "$errors" },
    });
    expect(workflowSubscription.status).toBe(200);
    const workspaceSubscription = await call(one.tenant.key, "POST", "/v1/subscriptions", {
      query: { emitter_id: one.tenant.workspaceId, listener_id: one.tenant.webhookId, event_name: "$errors" },
    });
    expect(workspaceSubscription.status).toBe(200);
    one.tenant.subscriptionIds.push(workflowSubscription.json.data.id, workspaceSubscription.json.data.id);

    // User 2, made from the command line while the server runs.
    const { stdout } = await runSluice(
      ["create-user", "--username", SECOND_USER.username, "--email", SECOND_USER.email],
      { SLUICE_DATA_DIR: sluice.dataDir },
    );
    const created = JSON.parse(stdout);
    const two = await populate(created.api_key, "tenant-two-probe", { mine: "two" });
    // Names are per user: the same name as user 1's gets no counter.
    expect(two.sourceName).toBe(one.sourceName);

    fixture = { one: one.tenant, two: two.tenant, oneWorkflows, deadUrl: receiver.url() };
    const samplesOf = (t: Tenant, componentKeys: string[], registryKey: string): Samples => ({
      sources: [t.sourceId],
      webhooks: [t.webhookId],
      dead_letters: [t.deadLetterId],
      workspaces: [t.workspaceId],
      orgs: [t.workspaceId],
      workflows: [t.workflowId],
      components: [t.componentId, ...componentKeys],
      // `/connect/{project_id}/{component_kind}/{key}`, its word filled as `actions`.
      actions: [t.componentId, ...componentKeys],
      registry: [registryKey],
      data_stores: [t.dataStoreId],
      // `/connect/{project_id}/components/...`
      connect: [t.projectId],
      accounts: [t.accountId, t.oauthAccountId],
      // The catalog is shared: one app for both (SHARED_ROUTES are not probed for a 404).
      apps: ["postgresql"],
    });
    oneSamples = samplesOf(fixture.one, [COMPONENT_KEY], COMPONENT_KEY);
    twoSamples = samplesOf(fixture.two, [], "http-new-requests");
    const endpointKey = fixture.one.endpointUrl.split("/").pop() ?? "";
    oneStrings = [
      ...Object.values(fixture.one).flat(),
      endpointKey,
      ...oneWorkflows,
      ROOT_USER.username,
      ROOT_USER.email,
      COMPONENT_KEY,
      MARKER,
    ].filter((value) => typeof value === "string" && value.length > 0);

    // User 2's lists are read first: reading a registry component saves it once, and that write
    // must happen before the snapshot of the file.
    twoLists = await everyGet(fixture.two.key, twoSamples);
    // Made before the snapshot of the data file: the probes after it must write nothing.
    for (const [kind, code] of [
      ["action", APP_ACTION],
      ["source", APP_SOURCE],
    ] as const) {
      appComponents[kind] = (
        await ok(call(fixture.two.key, "POST", "/v1/components", { body: { component_code: code } }))
      ).id as string;
    }
    oneApiBefore = await everyGet(fixture.one.key, oneSamples);
    oneDbBefore = databaseSnapshot(sluice.dataDir);
  });

  afterAll(async () => {
    await sluice?.stop();
    await receiver?.stop();
    await provider?.close();
  });

  it("404s every route that takes a path id, given user 1's, exactly like a missing id", async () => {
    const uncovered: string[] = [];
    let probed = 0;
    for (const route of routes) {
      const holes = placeholders(route.path);
      if (holes.length === 0 || SHARED_ROUTES.has(route.name)) continue;
      for (const hole of holes) if (!oneSamples[hole.owner]?.length) uncovered.push(`${route.name} {${hole.name}}`);
      if (holes.some((hole) => !oneSamples[hole.owner]?.length)) continue;
      // Each placeholder takes each of user 1's samples in turn; the others are user 1's first
      // sample, or (when user 2 has one for every other) user 2's own.
      const variants: Array<Array<{ value: string; theirs: boolean }>> = [];
      holes.forEach((hole, index) => {
        for (const value of oneSamples[hole.owner] ?? []) {
          const pick = (mine: boolean) =>
            holes.map((other, j) =>
              j === index
                ? { value, theirs: true }
                : mine
                  ? { value: twoSamples[other.owner]?.[0] ?? "", theirs: false }
                  : { value: oneSamples[other.owner]?.[0] ?? "", theirs: true },
            );
          variants.push(pick(false));
          if (holes.length > 1 && holes.every((other, j) => j === index || twoSamples[other.owner]?.length)) {
            variants.push(pick(true));
          }
        }
      });
      for (const variant of variants) {
        const path = fillPath(
          route.path,
          variant.map((v) => v.value),
        );
        const missing = fillPath(
          route.path,
          variant.map((v) => (v.theirs ? missingTwin(v.value) : v.value)),
        );
        const body = route.body ? {} : undefined;
        const answer = await call(fixture.two.key, route.method, path, { body });
        const what = `${route.method} ${path} as user 2`;
        expect(answer.status, `${what}: ${answer.text}`).toBe(404);
        expectErrorShape(answer, what);
        const twin = await call(fixture.two.key, route.method, missing, { body });
        expect({ status: answer.status, json: answer.json }, `${what} against ${missing}`).toEqual({
          status: twin.status,
          json: twin.json,
        });
        probed++;
      }
    }
    expect(uncovered, "path placeholders without a sample of user 1's: add one to samplesOf").toEqual([]);
    expect(probed).toBeGreaterThanOrEqual(15);
  });

  it("refuses user 1's ids in queries and bodies (subscriptions, auto subscriptions, workspaces, components)", async () => {
    const oneValues = new Set([...Object.values(fixture.one).flat(), ...fixture.oneWorkflows]);
    const uncovered: string[] = [];
    for (const route of routes) {
      const requests = CROSS_REQUESTS[route.name]?.(fixture) ?? [];
      for (const field of idFields(route)) {
        const named = requests.some((request) => {
          const value = request.query?.[field] ?? request.body?.[field];
          return typeof value === "string" && oneValues.has(value);
        });
        if (!named) uncovered.push(`${route.name} ${field}`);
      }
      const ownPath = fillPath(
        route.path,
        placeholders(route.path).map((hole) => twoSamples[hole.owner]?.[0] ?? ""),
      );
      for (const request of requests) {
        const answer = await call(fixture.two.key, route.method, ownPath, request);
        const what = `${route.method} ${ownPath} ${JSON.stringify(request.query ?? request.body)} as user 2`;
        expect(answer.status, `${what}: ${answer.text}`).toBe(request.status ?? 404);
        if (answer.status >= 400) expectErrorShape(answer, what);
        if (request.sameAsMissing === false) continue;
        const swap = (fields: Record<string, unknown> | undefined) =>
          fields &&
          Object.fromEntries(
            Object.entries(fields).map(([name, value]) => [
              name,
              typeof value === "string" && oneValues.has(value) ? missingTwin(value) : value,
            ]),
          );
        const twin = await call(fixture.two.key, route.method, ownPath, {
          query: swap(request.query) as Record<string, string> | undefined,
          body: swap(request.body),
        });
        expect({ status: answer.status, json: answer.json }, what).toEqual({ status: twin.status, json: twin.json });
      }
    }
    expect(uncovered, "query or body id fields no request names with user 1's id: add one to CROSS_REQUESTS").toEqual(
      [],
    );
  });

  it("404s user 1's source on the live stream route", async () => {
    const stream = async (sourceId: string) => {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), 5_000);
      try {
        const response = await fetch(`${root}/sources/${sourceId}/sse`, {
          headers: { authorization: `Bearer ${fixture.two.key}`, "last-event-id": fixture.one.eventId },
          signal: abort.signal,
        });
        // A stream that opened would never end: read only the headers of an answer that is not an error.
        if (response.status < 400) {
          abort.abort();
          return {
            status: response.status,
            json: undefined,
            text: `(a ${response.headers.get("content-type")} stream)`,
          };
        }
        const text = await response.text();
        return { status: response.status, json: JSON.parse(text), text };
      } finally {
        clearTimeout(timer);
      }
    };
    const answer = await stream(fixture.one.sourceId);
    expect(answer.status, answer.text).toBe(404);
    expectErrorShape(answer, "GET /sources/{id}/sse as user 2");
    const twin = await stream(missingTwin(fixture.one.sourceId));
    expect({ status: answer.status, json: answer.json }).toEqual({ status: twin.status, json: twin.json });
  });

  it("shows user 2 only their own resources in every list (every GET route with their own ids)", () => {
    expect(Object.keys(twoLists).length).toBe(apiGets.length);
    for (const [request, answer] of Object.entries(twoLists)) {
      expect(answer.status, `${request}: ${answer.text}`).toBe(200);
      const leaked = oneStrings.filter((value) => answer.text.includes(value));
      expect(leaked, `${request} shows user 1's`).toEqual([]);
    }
    const ids = (name: string) => {
      const entry = Object.entries(twoLists).find(([request]) => request.startsWith(`${name} `));
      return (entry?.[1].json.data ?? []).map((item: { id: string }) => item.id);
    };
    const two = fixture.two;
    expect(ids("list-user-sources")).toEqual([two.sourceId]);
    expect(ids("list-workspace-sources")).toEqual([two.sourceId]);
    expect(ids("list-user-webhooks")).toEqual([two.webhookId]);
    expect(ids("list-dead-letters")).toEqual([two.deadLetterId]);
    expect(ids("list-source-events")).toEqual([two.eventId]);
    expect(ids("list-workspace-projects")).toEqual([two.projectId]);
    expect(ids("list-user-workflows")).toEqual([two.workflowId]);
    expect(ids("list-workspace-workflows")).toEqual([two.workflowId]);
    expect(ids("list-workflow-events")).toEqual([]);
    expect(ids("list-workflow-errors")).toEqual([]);
    expect(ids("list-user-accounts")).toEqual([two.accountId, two.oauthAccountId].sort());
    expect(ids("list-workspace-accounts")).toEqual([two.accountId, two.oauthAccountId].sort());
    expect(ids("list-user-subscriptions").sort()).toEqual([...two.subscriptionIds].sort());
    // Its own subscription and the two its auto subscription made: of its source and of its workflow.
    expect(two.subscriptionIds.length).toBe(3);
  });

  it("refuses user 1's accounts in every prop that takes one, as it refuses a missing id", async () => {
    // Components whose code reads $auth, configured with user 1's key and OAuth accounts through
    // each way a prop is configured: a source, its update, a workflow step, the dynamic props routes.
    const { action, source } = appComponents;
    const requests = (id: string): Array<[string, string, Record<string, unknown>]> => {
      const props = { openai: { authProvisionId: id } };
      return [
        ["POST", "/v1/sources", { component_id: source, configured_props: props }],
        ["PUT", `/v1/sources/${fixture.two.sourceId}`, { component_id: source, configured_props: props }],
        ["POST", "/v1/workflows", { ...WORKFLOW_BODY, steps: [{ namespace: "s", component_id: action, props }] }],
        [
          "PUT",
          `/v1/workflows/${fixture.two.workflowId}`,
          { steps: [{ namespace: "s", component_id: action, props }] },
        ],
        ["POST", "/v1/components/configure", { id: source, prop_name: "openai", configured_props: props }],
        ["POST", "/v1/components/props", { id: source, configured_props: props }],
      ];
    };
    for (const theirs of [fixture.one.accountId, fixture.one.oauthAccountId]) {
      const missing = missingTwin(theirs);
      const mine = requests(theirs);
      const twins = requests(missing);
      for (const [i, [method, path, body]] of mine.entries()) {
        const answer = await call(fixture.two.key, method, path, { body });
        const what = `${method} ${path} with user 1's account ${theirs}`;
        expect(answer.status, `${what}: ${answer.text}`).toBe(400);
        expect(answer.text, what).toContain("no connected account of this workspace");
        expect(answer.text, what).not.toContain(MARKER);
        const [, , twinBody] = twins[i] as [string, string, Record<string, unknown>];
        const twin = await call(fixture.two.key, method, path, { body: twinBody });
        expect(answer.text.split(theirs).join(missing), what).toBe(twin.text);
      }
    }
  });

  // Runs last (vitest runs a file's tests in order): after every probe above.
  it("changed nothing of user 1's: the API answers and the data file are as before the probes", async () => {
    expect(await everyGet(fixture.one.key, oneSamples)).toEqual(oneApiBefore);
    const me = oneApiBefore[Object.keys(oneApiBefore).find((request) => request.startsWith("get-me ")) ?? ""];
    expect(me?.json.data.username).toBe(ROOT_USER.username);
    expect(databaseSnapshot(sluice.dataDir)).toEqual(oneDbBefore);
  });
});
