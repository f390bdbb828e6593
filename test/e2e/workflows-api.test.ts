import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { route as createWorkflowRoute } from "#http/create-workflow";
import { route as listUserWorkflowsRoute } from "#http/list-user-workflows";
import { route as listWorkflowEventsRoute } from "#http/list-workflow-events";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { dataOf, openRawStream } from "../support/sse-client.ts";

/**
 * The workflow routes over real HTTP against `npm start` (design step 5): steps described in the
 * real sandbox, the real SQLite stores. Triggers are stored only at this step; runs are tested
 * where they are built.
 */
const CODE_STEP = `export default defineComponent({
  async run({ steps, $ }) {
    $.export("seen", steps.trigger.event);
    return "ok";
  },
});`;

const BROKEN_STEP = `export default defineComponent({
  async run({ steps, $ }) {
    return (;
  },
});`;

const SOURCE_WITH_HOOKS = `export default {
  name: "Hooked",
  version: "0.0.1",
  props: {},
  hooks: { async deploy() {} },
  async run() {},
};`;

const QUIET_SOURCE = `export default {
  name: "Quiet",
  version: "0.0.1",
  props: {},
  async run() {},
};`;

const body = (extra: Record<string, unknown> = {}) => ({
  settings: { name: "Orders" },
  steps: [
    { namespace: "parse", component_code: CODE_STEP },
    { namespace: "send", key: "http-send-request", props: { url: "https://example.com/hook", method: "POST" } },
  ],
  triggers: [
    { type: "http", props: { custom_response: true } },
    { type: "timer", props: { cron: "0 9 * * 1", timezone: "Europe/Paris" } },
  ],
  ...extra,
});

describe("workflows API over real HTTP against local mode", () => {
  let sluice: SluiceProcess;
  let api: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let other: (method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  let otherKey: string;
  let workspaceId: string;

  const create = async (input: unknown = body()) => {
    const answer = await api("POST", "/workflows", input);
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    return answer.json.data;
  };
  const expect400 = (answer: ApiAnswer, field: string) => {
    expect(answer.status, JSON.stringify(answer.json)).toBe(400);
    expect(answer.json.details.map((d: { field: string }) => d.field)).toContain(field);
    expect(answer.json.error).toContain(`${field}: `);
  };

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const { stdout } = await runSluice(["create-user", "--username", "other", "--email", "other@example.com"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    otherKey = JSON.parse(stdout).api_key;
    other = apiClient(sluice.baseUrl, otherKey);
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("creates a workflow of a code step and a registry action with HTTP and timer triggers, and reads it back", async () => {
    const created = await create();
    expect(createWorkflowRoute.response.safeParse({ data: created }).error).toBeUndefined();
    expect(created).toMatchObject({
      id: expect.stringMatching(/^p_/),
      name: "Orders",
      active: false,
      org_id: workspaceId,
      project_id: expect.stringMatching(/^proj_/),
      deployment_id: expect.stringMatching(/^d_/),
    });
    expect(created.steps.map((s: { type: string; namespace: string }) => [s.namespace, s.type])).toEqual([
      ["parse", "CodeCell"],
      ["send", "ActionCell"],
    ]);
    expect(created.steps[0].code_raw).toBe(CODE_STEP);
    expect(created.steps[1]).toMatchObject({ component_key: "http-send-request", component_owner_id: null });
    expect(JSON.parse(created.steps[1].configured_props_json)).toEqual({
      url: "https://example.com/hook",
      method: "POST",
    });
    const [http, timer] = created.triggers;
    expect(http.endpoint_url).toBe(`${sluice.baseUrl.replace(/\/v1$/, "")}/http/${http.key}`);
    expect(http.custom_response).toBe(true);
    expect(timer).toMatchObject({ id: expect.stringMatching(/^ti_/), cron: "0 9 * * 1", timezone: "Europe/Paris" });

    const read = await api("GET", `/workflows/${created.id}`);
    expect(read.status).toBe(200);
    expect(read.json.data).toEqual(created);
    expect((await api("GET", `/workflows/${created.id}?org_id=${workspaceId}`)).json.data).toEqual(created);
  });

  it("answers 400 naming the field, with the loader's line for code that does not load", async () => {
    const broken = await api("POST", "/workflows", { steps: [{ namespace: "a", component_code: BROKEN_STEP }] });
    expect400(broken, "steps[0].component_code");
    expect(broken.json.error).toMatch(/line 3|:3/);
    expect400(
      await api("POST", "/workflows", { steps: [{ namespace: "a", component_code: SOURCE_WITH_HOOKS }] }),
      "steps[0].component_code",
    );
    expect400(await api("POST", "/workflows", { steps: [] }), "steps");
    expect400(
      await api("POST", "/workflows", body({ steps: [{ namespace: "trigger", component_code: CODE_STEP }] })),
      "steps[0].namespace",
    );
    expect400(
      await api(
        "POST",
        "/workflows",
        body({ steps: [{ namespace: "a", key: "http-send-request", props: { method: 1 } }] }),
      ),
      "steps[0].props.url",
    );
    expect400(await api("POST", "/workflows", body({ triggers: [{ type: "email" }] })), "triggers[0].type");
    expect400(
      await api("POST", "/workflows", body({ triggers: [{ type: "timer", props: { cron: "61 * * * *" } }] })),
      "triggers[0].props.cron",
    );
    expect400(await api("POST", "/workflows", body({ settings: { name: "" } })), "settings.name");
    expect400(await api("POST", "/workflows", body({ external_id: "" })), "external_id");
    expect400(await api("POST", "/workflows", body({ external_id: "x".repeat(201) })), "external_id");
    expect400(await api("POST", "/workflows", { template_id: "tch_nothing" }), "template_id");
    // Types are the request schema's: its field path is written with dots.
    expect400(
      await api("POST", "/workflows", { steps: [{ namespace: "a", component_code: CODE_STEP, disabled: "no" }] }),
      "steps.0.disabled",
    );
    // A source trigger's source is typed as POST /v1/sources types it (these were 500s, or a nameless source).
    const source = (props: Record<string, unknown>) => body({ triggers: [{ type: "source", props }] });
    for (const [props, field] of [
      [{ component_code: 5 }, "triggers.0.props.component_code"],
      [{ component_id: 5 }, "triggers.0.props.component_id"],
      [{ key: ["x"] }, "triggers.0.props.key"],
      [{ component_code: CODE_STEP, name: 5 }, "triggers.0.props.name"],
      [{ component_code: CODE_STEP, name: "" }, "triggers.0.props.name"],
      [{ component_code: CODE_STEP, name: "x".repeat(201) }, "triggers.0.props.name"],
      [{ component_code: CODE_STEP, configured_props: [] }, "triggers.0.props.configured_props"],
      [{ custom_response: null }, "triggers.0.props.custom_response"],
    ] as const) {
      expect400(await api("POST", "/workflows", source(props)), field);
    }
    const listed = await api("GET", "/users/me/workflows?limit=100");
    expect(listed.json.data.every((w: { name: string }) => w.name === "Orders")).toBe(true);
  });

  it("lists the caller's workflows and a workspace's, newest first, with paging", async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await create(body({ settings: { name: `page ${i}` } }))).id);
    const first = await api("GET", "/users/me/workflows?limit=2");
    expect(listUserWorkflowsRoute.response.safeParse(first.json).error).toBeUndefined();
    expect(first.json.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    const second = await api("GET", `/users/me/workflows?limit=2&after=${first.json.page_info.end_cursor}`);
    expect(second.json.data[0].id).toBe(ids[0]);
    const inWorkspace = await api("GET", `/workspaces/${workspaceId}/workflows?limit=3`);
    expect(inWorkspace.json.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(inWorkspace.json.page_info.total_count).toBe(first.json.page_info.total_count);
  });

  it("activates and deactivates with PUT active, keeping the deployment and the trigger keys", async () => {
    const created = await create();
    const on = await api("PUT", `/workflows/${created.id}`, { active: true });
    expect(on.status, JSON.stringify(on.json)).toBe(200);
    expect(on.json.data).toMatchObject({
      active: true,
      deployment_id: created.deployment_id,
      triggers: created.triggers,
    });
    const off = await api("PUT", `/workflows/${created.id}`, { active: false });
    expect(off.json.data.active).toBe(false);
    const renamed = await api("PUT", `/workflows/${created.id}`, { settings: { name: "Renamed" } });
    expect(renamed.json.data).toMatchObject({ name: "Renamed", active: false });
    const replaced = await api("PUT", `/workflows/${created.id}`, {
      steps: [{ namespace: "parse", component_code: CODE_STEP }],
    });
    expect(replaced.json.data.deployment_id).not.toBe(created.deployment_id);
    expect(replaced.json.data.steps.map((s: { id: string }) => s.id)).toEqual([created.steps[0].id]);
  });

  it("lists a new workflow's events and errors as empty pages", async () => {
    const created = await create();
    for (const path of [
      `/workflows/${created.id}/event_summaries`,
      `/workflows/${created.id}/$errors/event_summaries`,
    ]) {
      const answer = await api("GET", path);
      expect(answer.status, path).toBe(200);
      expect(listWorkflowEventsRoute.response.safeParse(answer.json).error).toBeUndefined();
      expect(answer.json).toEqual({
        page_info: { total_count: 0, count: 0, start_cursor: null, end_cursor: null },
        data: [],
      });
    }
    expect400(await api("GET", `/workflows/${created.id}/event_summaries?expand=all`), "expand");
  });

  it("answers 404 on every workflow route for another account's workflow, and changes nothing", async () => {
    const created = await create();
    const id = created.id;
    const attempts: [string, string, unknown?][] = [
      ["GET", `/workflows/${id}`],
      ["PUT", `/workflows/${id}`, { active: true }],
      ["DELETE", `/workflows/${id}`],
      ["GET", `/workflows/${id}/event_summaries`],
      ["GET", `/workflows/${id}/$errors/event_summaries`],
      ["GET", `/workspaces/${workspaceId}/workflows`],
    ];
    for (const [method, path, input] of attempts) {
      const answer = await other(method, path, input);
      expect(answer.status, `${method} ${path}`).toBe(404);
    }
    expect((await other("GET", "/users/me/workflows")).json.data).toEqual([]);
    expect((await api("GET", `/workflows/${id}`)).json.data).toEqual(created);
  });

  it("deploys a source trigger's source for the workflow, subscribes to it, and deletes it with the workflow", async () => {
    const given = await api("POST", "/sources", { component_code: QUIET_SOURCE, name: "given" });
    expect(given.status, JSON.stringify(given.json)).toBe(200);
    const created = await create(
      body({
        triggers: [
          { type: "source", props: { component_code: QUIET_SOURCE, name: "deployed" } },
          { type: "source", props: { source_id: given.json.data.id } },
        ],
      }),
    );
    const [deployed, named] = created.triggers;
    expect(deployed).toMatchObject({ name: "deployed", owner_id: created.id, active: false });
    expect(named).toMatchObject({ id: given.json.data.id, owner_id: workspaceId, active: true });
    // The source's own views show the workflow that deployed it as its owner, as its trigger does.
    expect((await api("GET", `/sources/${deployed.id}`)).json.data).toMatchObject({ owner_id: created.id });
    const listed = (await api("GET", "/users/me/sources?limit=100")).json.data;
    const owners = Object.fromEntries(listed.map((s: { id: string; owner_id: string }) => [s.id, s.owner_id]));
    expect(owners).toMatchObject({ [deployed.id]: created.id, [named.id]: workspaceId });
    const subscriptions = await api("GET", "/users/me/subscriptions?limit=100");
    const toWorkflow = subscriptions.json.data.filter((s: { listener_id: string }) => s.listener_id === created.id);
    expect(toWorkflow.map((s: { emitter_id: string }) => s.emitter_id).sort()).toEqual([deployed.id, named.id].sort());
    const on = await api("PUT", `/workflows/${created.id}`, { active: true });
    expect(on.json.data.triggers[0]).toMatchObject({ id: deployed.id, active: true });
    expect((await api("DELETE", `/workflows/${created.id}`)).status).toBe(200);
    expect((await api("GET", `/sources/${deployed.id}`)).status).toBe(404);
    expect((await api("GET", `/sources/${named.id}`)).json.data).toMatchObject({ id: named.id, active: true });
    const after = await api("GET", "/users/me/subscriptions?limit=100");
    expect(after.json.data.filter((s: { listener_id: string }) => s.listener_id === created.id)).toEqual([]);
  });

  it("deletes a workflow: it answers 404 afterwards and leaves the lists", async () => {
    const created = await create();
    const deleted = await api("DELETE", `/workflows/${created.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ data: { id: created.id, deleted: true } });
    expect((await api("GET", `/workflows/${created.id}`)).status).toBe(404);
    expect((await api("DELETE", `/workflows/${created.id}`)).status).toBe(404);
    const listed = await api("GET", "/users/me/workflows?limit=100");
    expect(listed.json.data.map((w: { id: string }) => w.id)).not.toContain(created.id);
  });

  it("deletes a workflow while runs of it are under way: none of its events or runs is left in the data file", async () => {
    const slow = `export default defineComponent({
      async run({ steps, $ }) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        $.send.emit({ raw_event: steps.trigger.event.body });
      },
    });`;
    const created = await create({
      settings: { name: "Slow", auto_deploy: true },
      steps: [{ namespace: "slow", component_code: slow }],
      triggers: [{ type: "http", props: {} }],
    });
    const url = created.triggers[0].endpoint_url;
    const accepted = await Promise.all(
      [1, 2, 3, 4].map((n) => fetch(url, { method: "POST", body: JSON.stringify({ n }) }).then((r) => r.status)),
    );
    expect(accepted).toEqual([200, 200, 200, 200]);
    await eventually(
      async () => {
        const runs = await api("GET", `/workflows/${created.id}/runs`);
        return runs.json.data.some((run: { status: string }) => run.status === "running") || undefined;
      },
      "a run under way",
      { timeoutMs: 10_000, intervalMs: 20 },
    );
    expect((await api("DELETE", `/workflows/${created.id}`)).status).toBe(200);
    // The runs that were under way ended with the deletion; let any write of theirs land.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const db = new Database(join(sluice.dataDir, "sluice.db"), { readonly: true, fileMustExist: true });
    try {
      const left = (sql: string) => (db.prepare(sql).get(created.id) as { n: number }).n;
      expect(left("SELECT count(*) AS n FROM events WHERE source_id = ?")).toBe(0);
      expect(left("SELECT count(*) AS n FROM workflow_runs WHERE workflow_id = ?")).toBe(0);
    } finally {
      db.close();
    }
  });

  it("a CI job's create and PUT with an external_id, sent again, change nothing; another account's is its own", async () => {
    const definition = body({ external_id: "ci-orders" });
    const created = await create(definition);
    expect(created.external_id).toBe("ci-orders");
    expect(await create(definition)).toEqual(created);
    const conflict = await api("POST", "/workflows", { ...definition, settings: { name: "Changed" } });
    expect(conflict.status).toBe(409);
    expect(conflict.json.error).toBe(`external_id: already names workflow ${created.id} with another definition`);
    // Two creates at once with a new external id make one workflow, which both answer.
    const raced = await Promise.all([0, 1].map(() => api("POST", "/workflows", body({ external_id: "ci-race" }))));
    expect(raced.map((answer) => answer.status)).toEqual([200, 200]);
    expect(raced[1]?.json.data.id).toBe(raced[0]?.json.data.id);
    const listed = (await api("GET", "/users/me/workflows?limit=100")).json.data;
    expect(listed.filter((w: { external_id: string | null }) => w.external_id === "ci-race")).toHaveLength(1);
    // The same external id in another account's workspace names nothing of ours.
    const theirs = await other("POST", "/workflows", definition);
    expect(theirs.status).toBe(200);
    expect(theirs.json.data.id).not.toBe(created.id);

    const { settings: _name, ...put } = { ...definition, active: true };
    const first = await api("PUT", `/workflows/${created.id}`, put);
    expect(first.status).toBe(200);
    expect(first.json.data.deployment_id).not.toBe(created.deployment_id);
    const again = await api("PUT", `/workflows/${created.id}`, put);
    expect(again.json.data).toEqual(first.json.data);
    expect((await api("GET", `/workflows/${created.id}`)).json.data).toEqual(first.json.data);
  });

  it("creates each shipped template in the real sandbox, and runs tch_http_echo through its endpoint", async () => {
    for (const template_id of ["tch_schedule_to_webhook", "tch_errors_to_webhook"]) {
      const made = await create({ template_id });
      expect(made).toMatchObject({ active: false, steps: [expect.objectContaining({ type: "CodeCell" })] });
    }
    const echo = await create({ template_id: "tch_http_echo", settings: { auto_deploy: true } });
    expect(echo).toMatchObject({ name: "HTTP echo", active: true });
    const response = await fetch(`${echo.triggers[0].endpoint_url}/orders?n=1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ order: 42 }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      method: "POST",
      path: "/orders",
      query: { n: "1" },
      body: { order: 42 },
    });
  });

  it("streams what runs send with $.send.sse at /workflows/{id}/sse: the sends before it connected, then live ones", async () => {
    const sender = `export default defineComponent({
      async run({ steps, $ }) {
        $.send.sse({ channel: "orders", payload: { n: steps.trigger.event.body.n } });
      },
    });`;
    const workflow = await create({
      settings: { auto_deploy: true },
      steps: [{ namespace: "send", component_code: sender }],
      triggers: [{ type: "http" }],
    });
    const trigger = (n: number) =>
      fetch(workflow.triggers[0].endpoint_url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n }),
      });
    const runs = async () => (await api("GET", `/workflows/${workflow.id}/runs`)).json.data;
    expect((await trigger(1)).status).toBe(200);
    await eventually(async () => when((await runs()).length === 1), "the first run");

    const root = sluice.baseUrl.replace(/\/v1$/, "");
    const url = `${root}/workflows/${workflow.id}/sse`;
    const stream = await openRawStream(url, { authorization: `Bearer ${sluice.apiKeyFromFile()}` });
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
      await eventually(() => when(stream.messages.length === 1), "the send made before connecting");
      expect((await trigger(2)).status).toBe(200);
      await eventually(() => when(stream.messages.length === 2), "the live send");
      expect(stream.messages.map((message) => message.event)).toEqual(["orders", "orders"]);
      expect(dataOf(stream.messages).map((data) => data.event)).toEqual([{ n: 1 }, { n: 2 }]);
      // The envelope names the run's channel as `event:` does, not the `$sse` channel it is stored on.
      expect(dataOf(stream.messages).map((data) => data.metadata.name)).toEqual(["orders", "orders"]);
    } finally {
      stream.close();
    }

    for (const [headers, status] of [
      [{ authorization: `Bearer ${otherKey}` }, 404],
      [{}, 401],
    ] as const) {
      const refused = await openRawStream(url, headers);
      expect(refused.status).toBe(status);
      await eventually(() => when(refused.ended()), "the refusal's end");
      expect(JSON.parse(refused.text())).toEqual({ error: expect.any(String) });
    }
  });
});
