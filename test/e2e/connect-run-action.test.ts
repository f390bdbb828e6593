/**
 * The Connect API's run action, `POST /v1/connect/{project_id}/actions/run`, on `npm start` and
 * its real sandbox (docs/components.md "Running an action"): registry-shaped actions (the fixtures
 * of test/fixtures/actions/) run once, outside any workflow, answered `{exports, os, ret}`.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiAnswer, apiClient } from "../support/api-client.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/actions/${name}`, import.meta.url), "utf8");

/** An action that logs, exports, counts its runs in a data store, and fails or sends when told. */
const COUNTER = `export default {
  key: "run-action-counter",
  name: "Count a Run",
  version: "0.2.0",
  type: "action",
  props: {
    label: { type: "string", label: "Label" },
    token: { type: "string", label: "Token", secret: true, optional: true },
    store: { type: "data_store", label: "Store" },
    mode: { type: "string", optional: true, default: "count" },
  },
  async run({ $ }) {
    console.log("counting", this.label, "with", this.token ?? "no token");
    const runs = ((await this.store.get(this.label)) ?? 0) + 1;
    await this.store.set(this.label, runs);
    $.export("$summary", \`Run \${runs} of \${this.label}\`);
    if (this.mode === "fail") throw new Error("failed on purpose after " + runs + " runs");
    if (this.mode === "send") $.send.http({ method: "POST", url: "https://example.test/hook" });
    if (this.mode === "tmp") {
      const fs = await import("node:fs");
      fs.writeFileSync("/tmp/" + this.label, String(runs));
      return fs.readFileSync("/tmp/" + this.label, "utf8");
    }
    return { runs, token: this.token ?? null };
  },
};`;

/** An action whose `additionalProps` adds a prop when another says so. */
const DYNAMIC = `export default {
  key: "run-action-dynamic",
  name: "Dynamic",
  version: "0.0.1",
  type: "action",
  props: { withExtra: { type: "boolean", reloadProps: true } },
  async additionalProps() {
    return this.withExtra ? { extra: { type: "integer", label: "Extra" } } : {};
  },
  async run() {
    return { extra: this.extra ?? null };
  },
};`;

/** An action that writes a file of the project's File Store when given text, and lists the store. */
const FILER = `export default {
  key: "run-action-filer",
  name: "Filer",
  version: "0.0.1",
  type: "action",
  props: { path: { type: "string" }, text: { type: "string", optional: true } },
  async run({ $ }) {
    const { Readable } = await import("node:stream");
    if (this.text !== undefined) await $.files.open(this.path).fromReadableStream(Readable.from([this.text]));
    const listed = [];
    for await (const entry of $.files.dir()) listed.push(entry.path);
    return { listed, text: this.text === undefined ? null : await $.files.open(this.path).toEncodedString() };
  },
};`;

const SOURCE = `export default { key: "run-action-source", name: "A source", version: "0.0.1", props: {}, async run() {} };`;

describe("POST /v1/connect/{project_id}/actions/run, against local mode", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let projectId: string;
  let workspaceId: string;
  let receiver: WebhookReceiver;

  const runAction = (body: Record<string, unknown>, project = projectId): Promise<ApiAnswer> =>
    api("POST", `/connect/${project}/actions/run`, body);

  beforeAll(async () => {
    sluice = await startSluice();
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
    projectId = (await api("GET", `/workspaces/${workspaceId}/projects`)).json.data[0].id;
    for (const code of [COUNTER, DYNAMIC, SOURCE, FILER]) {
      const saved = await api("POST", "/components", { component_code: code });
      expect(saved.status, JSON.stringify(saved.json)).toBe(200);
    }
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await receiver?.stop();
    await sluice?.stop();
  });

  it("reads an action at the Connect API's paths, as GET /v1/components/{key} answers it", async () => {
    const direct = await api("GET", "/components/run-action-counter");
    expect(direct.status).toBe(200);
    for (const kind of ["components", "actions", "triggers"]) {
      const viaConnect = await api("GET", `/connect/${projectId}/${kind}/run-action-counter`);
      expect(viaConnect.status, JSON.stringify(viaConnect.json)).toBe(200);
      expect(viaConnect.json).toEqual(direct.json);
    }
    expect(direct.json.data).toMatchObject({ key: "run-action-counter", type: "action", version: "0.2.0" });
    const word = await api("GET", `/connect/${projectId}/sources/run-action-counter`);
    expect([word.status, word.json.error]).toEqual([
      404,
      `no route for GET /v1/connect/${projectId}/sources/run-action-counter`,
    ]);
    expect((await api("GET", `/connect/${projectId}/actions/no-such-key`)).status).toBe(404);
  });

  it("runs a registry-shaped action once: its return value, exports and $summary come back", async () => {
    const answer = await runAction({
      id: (await api("POST", "/components", { component_code: fixture("get-json.mjs") })).json.data.id,
      external_user_id: "user-42",
      configured_props: { url: receiver.url("/doc") },
    });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json).toEqual({
      exports: {
        $summary: "Got 2 characters",
        debug_config: expect.objectContaining({ url: receiver.url("/doc") }),
        debug_response: "ok",
      },
      os: [],
      ret: "ok",
    });
    expect(receiver.requests.map((request) => request.path)).toEqual(["/doc?page=2"]);
  });

  it("binds its data store and answers its console lines as observations", async () => {
    const body = {
      id: "run-action-counter",
      configured_props: { label: "orders", token: "tok-123", store: { name: "run-counts" } },
    };
    const first = await runAction(body);
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json).toEqual({
      exports: { $summary: "Run 1 of orders" },
      os: [{ k: "console.log", msg: "counting orders with tok-123", ts: expect.any(Number) }],
      ret: { runs: 1, token: "tok-123" },
    });
    expect((await runAction(body)).json.ret).toEqual({ runs: 2, token: "tok-123" });
    // The store is the workspace's, named as configured: the API sees what the runs wrote.
    const stores = (await api("GET", `/workspaces/${workspaceId}/data_stores`)).json.data as {
      id: string;
      name: string;
    }[];
    const store = stores.find((candidate) => candidate.name === "run-counts");
    const records = (await api("GET", `/data_stores/${store?.id}/records`)).json.data;
    expect(records).toEqual([{ key: "orders", value: 2, expires_at: null }]);
  });

  it("masks its accounts' credentials in what it answers: longest first, and in numbers", async () => {
    const account = async (apiKey: string) => {
      const made = await api("POST", "/accounts", {
        app: "openai",
        name: `key ${apiKey}`,
        credentials: { api_key: apiKey },
      });
      expect(made.status, JSON.stringify(made.json)).toBe(200);
      return made.json.data.id as string;
    };
    const code = `export default {
      key: "run-action-credentials",
      name: "Credentials",
      version: "0.0.1",
      type: "action",
      props: { short: { type: "app", app: "openai" }, long: { type: "app", app: "openai" }, digits: { type: "app", app: "openai" } },
      async run({ $ }) {
        console.log("using", this.long.$auth.api_key);
        $.export("long", this.long.$auth.api_key);
        return { short: this.short.$auth.api_key, orderId: 1234567890, inText: "order 1234567890", kept: 42 };
      },
    };`;
    expect((await api("POST", "/components", { component_code: code })).status).toBe(200);
    const answer = await runAction({
      id: "run-action-credentials",
      configured_props: {
        short: { authProvisionId: await account("abcdefgh") },
        long: { authProvisionId: await account("abcdefgh-TAIL-SECRET-999") },
        digits: { authProvisionId: await account("1234567890") },
      },
    });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json).toEqual({
      exports: { long: "[credential]" },
      os: [{ k: "console.log", msg: "using [credential]", ts: expect.any(Number) }],
      ret: { short: "[credential]", orderId: "[credential]", inText: "order [credential]", kept: 42 },
    });
  });

  it("answers what the action threw, with the exports it made before, and refuses $.send.*", async () => {
    const failed = await runAction({
      id: "run-action-counter",
      configured_props: { label: "failing", store: { name: "run-counts" }, mode: "fail" },
    });
    expect(failed.status).toBe(200);
    expect(failed.json).toMatchObject({
      exports: { $summary: "Run 1 of failing" },
      error: { name: "Error", message: "failed on purpose after 1 runs" },
      os: [{ k: "console.log" }, { k: "error", err: { name: "Error", message: "failed on purpose after 1 runs" } }],
    });
    expect(failed.json.ret).toBeUndefined();
    const sending = await runAction({
      id: "run-action-counter",
      configured_props: { label: "sending", store: { name: "run-counts" }, mode: "send" },
    });
    expect(sending.json.error).toEqual({
      name: "NotImplementedError",
      message:
        "$.send.http: an action run on its own (the Connect run action) cannot send or pause: run it as a step of a workflow",
    });
    // A registry action's ConfigurationError, as a workflow step would record it.
    const configuration = await runAction({
      id: (await api("POST", "/components", { component_code: fixture("export-variables.mjs") })).json.data.id,
      configured_props: { values: { broken: "{not json" } },
    });
    expect(configuration.json.error?.name).toBe("ConfigurationError");
  });

  it("writes and reads its /tmp, as an action in a workflow does", async () => {
    const answer = await runAction({
      id: "run-action-counter",
      configured_props: { label: "tmp-file", store: { name: "run-counts" }, mode: "tmp" },
    });
    expect(answer.json).toMatchObject({ ret: "1", exports: { $summary: "Run 1 of tmp-file" } });
  });

  it("reaches the project's File Store, which another user's project does not share", async () => {
    const written = await runAction({
      id: "run-action-filer",
      configured_props: { path: "connect/a.txt", text: "kept" },
    });
    expect(written.json, JSON.stringify(written.json)).toMatchObject({ ret: { listed: ["connect"], text: "kept" } });
    const { stdout } = await runSluice(["create-user", "--username", "filer", "--email", "filer@example.com"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    const other = apiClient(sluice.baseUrl, JSON.parse(stdout).api_key);
    const otherWorkspace = (await other("GET", "/users/me")).json.data.orgs[0].id;
    const otherProject = (await other("GET", `/workspaces/${otherWorkspace}/projects`)).json.data[0].id;
    expect((await other("POST", "/components", { component_code: FILER })).status).toBe(200);
    const theirs = await other("POST", `/connect/${otherProject}/actions/run`, {
      id: "run-action-filer",
      configured_props: { path: "connect/a.txt" },
    });
    expect(theirs.json, JSON.stringify(theirs.json)).toMatchObject({ ret: { listed: [], text: null } });
    const again = await runAction({ id: "run-action-filer", configured_props: { path: "connect/a.txt" } });
    expect(again.json).toMatchObject({ ret: { listed: ["connect"], text: null } });
  });

  it("asks additionalProps first and checks the props it adds", async () => {
    const ok = await runAction({ id: "run-action-dynamic", configured_props: { withExtra: true, extra: 7 } });
    expect(ok.json, JSON.stringify(ok.json)).toEqual({ exports: {}, os: [], ret: { extra: 7 } });
    const bad = await runAction({ id: "run-action-dynamic", configured_props: { withExtra: true, extra: "seven" } });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toEqual([{ field: "configured_props.extra", message: "must be an integer" }]);
  });

  it("refuses what it cannot run before running anything: bad props, a source, another version, a File Stash", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ id: "run-action-counter", configured_props: { store: { name: "run-counts" } } }, "configured_props.label"],
      [{ id: "run-action-counter", configured_props: { label: 3 } }, "configured_props.label"],
      [{ id: "run-action-source" }, "id"],
      [{ id: "run-action-counter", version: "9.9.9", configured_props: { label: "v" } }, "version"],
      [{ id: "run-action-counter", stash_id: "NEW", configured_props: { label: "s" } }, "stash_id"],
      [{ id: "run-action-counter", configured_props: { label: "w" }, org_id: `o_${"0".repeat(22)}` }, "org_id"],
    ];
    for (const [body, field] of cases) {
      const answer = await runAction(body);
      expect(answer.status, JSON.stringify(answer.json)).toBe(400);
      expect(answer.json.details.map((detail: { field: string }) => detail.field)).toContain(field);
    }
    // Its own version is fine.
    const same = await runAction({
      id: "run-action-counter",
      version: "0.2.0",
      configured_props: { label: "versioned", store: { name: "run-counts" } },
    });
    expect(same.status).toBe(200);
  });

  it("answers 404 for another user's action or project, exactly as for missing ones", async () => {
    const { stdout } = await runSluice(["create-user", "--username", "other", "--email", "other@example.com"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    const other = apiClient(sluice.baseUrl, JSON.parse(stdout).api_key);
    const otherWorkspace = (await other("GET", "/users/me")).json.data.orgs[0].id;
    const otherProject = (await other("GET", `/workspaces/${otherWorkspace}/projects`)).json.data[0].id;
    const mine = (await api("GET", "/components/run-action-counter")).json.data.id as string;
    const theirs = await other("POST", `/connect/${otherProject}/actions/run`, { id: mine });
    const missing = await other("POST", `/connect/${otherProject}/actions/run`, { id: `sc_${"0".repeat(22)}` });
    expect([theirs.status, theirs.json]).toEqual([404, missing.json]);
    const foreignProject = await other("POST", `/connect/${projectId}/actions/run`, { id: "run-action-counter" });
    const missingProject = await other("POST", `/connect/proj_${"0".repeat(22)}/actions/run`, { id: "x" });
    expect([foreignProject.status, foreignProject.json]).toEqual([404, missingProject.json]);
  });
});

describe("the run action over a workspace's quota", () => {
  let sluice: SluiceProcess;

  beforeAll(async () => {
    sluice = await startSluice({ env: { SLUICE_RUNS_PER_MINUTE_QUOTA: "1", SLUICE_INVOCATION_TIMEOUT_MS: "2000" } });
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it("counts a run toward the runs per minute, and refuses the next before any of its code runs", async () => {
    const api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const workspace = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const project = (await api("GET", `/workspaces/${workspace}/projects`)).json.data[0].id;
    // Its additionalProps would take the whole time limit: refused first, it never runs.
    const slow = DYNAMIC.replace("async additionalProps() {", "async additionalProps() { await new Promise(() => {});");
    expect((await api("POST", "/components", { component_code: slow })).status).toBe(200);
    const plain = { id: "run-action-counter-free", configured_props: {} };
    const free = `export default { key: "run-action-counter-free", name: "Free", version: "0.0.1", type: "action", props: {}, async run() { return 1; } };`;
    expect((await api("POST", "/components", { component_code: free })).status).toBe(200);
    const slowRun = { id: "run-action-dynamic", configured_props: { withExtra: true } };
    // One run fills the minute's quota of 1; the next is refused before its additionalProps runs
    // (had it run, it would have taken the 2 s limit and answered a 400). Tried twice, in case the
    // minute turned between the two.
    let second: ApiAnswer | undefined;
    for (let attempt = 0; attempt < 2 && second?.status !== 200; attempt++) {
      const first = await api("POST", `/connect/${project}/actions/run`, plain);
      expect(first.status, JSON.stringify(first.json)).toBe(200);
      if (attempt === 0) expect(first.json).toEqual({ exports: {}, os: [], ret: 1 });
      second = await api("POST", `/connect/${project}/actions/run`, slowRun);
    }
    expect(second?.status, JSON.stringify(second?.json)).toBe(200);
    expect(second?.json).toMatchObject({
      exports: {},
      error: { name: "QuotaExceededError", message: expect.stringContaining("runs this minute") },
      os: [{ k: "error", err: { name: "QuotaExceededError" } }],
    });
  });
});
