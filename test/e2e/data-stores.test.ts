import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createHttpWorkflow, deployHttpSource } from "../support/api-client.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * `data_store` props against `npm start` (docs/data-stores.md): stores of a workspace reached from
 * the sandbox through the trusted side, shared by name, a store of its own when left unset, kept
 * apart between workspaces, and listed, read, cleared and deleted over REST.
 */

/** A source answering each request with what its run did to `this.dataStore` (a counter). */
const COUNTER = `
export default {
  name: "Counter",
  version: "0.0.1",
  props: {
    http: { type: "$.interface.http", customResponse: true },
    dataStore: { type: "data_store" },
  },
  async run(event) {
    const count = ((await this.dataStore.get("count")) ?? 0) + 1;
    await this.dataStore.set("count", count);
    this.http.respond({
      status: 200,
      body: { count, keys: await this.dataStore.keys(), has: await this.dataStore.has("count") },
    });
  },
};
`;

/**
 * A source that runs the store method its request names and answers with the result, or with the
 * error it threw. `data_stores.app.mjs`-style prop: `propDefinition` of an app.
 */
const OPERATOR = `
const app = {
  type: "app",
  app: "data_stores",
  propDefinitions: { dataStore: { label: "Data Store", type: "data_store" } },
};
export default {
  name: "Operator",
  version: "0.0.1",
  props: {
    app,
    http: { type: "$.interface.http", customResponse: true },
    dataStore: { propDefinition: [app, "dataStore"] },
  },
  async run(event) {
    const { op, args = [] } = event.body;
    try {
      let result;
      if (op === "entries") result = await this.dataStore.entries();
      else if (op === "iterate") {
        result = {};
        for await (const [key, value] of this.dataStore) result[key] = value;
      } else result = await this.dataStore[op](...args);
      this.http.respond({ status: 200, body: { result: result === undefined ? "undefined" : result } });
    } catch (error) {
      this.http.respond({ status: 200, body: { error: error.message } });
    }
  },
};
`;

let sluice: SluiceProcess;
let api: ReturnType<typeof apiClient>;
let workspaceId: string;

const post = async (url: string, body: unknown = {}) => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as any;
};

async function deploySource(code: string, configuredProps: Record<string, unknown> = {}, as = api) {
  const answer = await as("POST", "/sources", { component_code: code, configured_props: configuredProps });
  expect(answer.status, JSON.stringify(answer.json)).toBe(200);
  return { id: answer.json.data.id as string, endpoint: answer.json.data.configured_props.http.endpoint_url as string };
}

const storesOf = async (workspace: string, as = api) => {
  const answer = await as("GET", `/workspaces/${workspace}/data_stores`);
  expect(answer.status).toBe(200);
  return answer.json.data as { id: string; name: string; workspace_id: string }[];
};

const recordsOf = async (storeId: string, as = api) => {
  const answer = await as("GET", `/data_stores/${storeId}/records?limit=100`);
  expect(answer.status, JSON.stringify(answer.json)).toBe(200);
  return answer.json.data as { key: string; value: unknown; expires_at: string | null }[];
};

beforeAll(async () => {
  sluice = await startSluice();
  api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
});

afterAll(async () => {
  await sluice?.stop();
});

describe("data_store props", () => {
  it("gives a source left unconfigured a store of its own that keeps counting across runs", async () => {
    const source = await deployHttpSource(api, COUNTER);
    expect((await post(source.endpoint)).count).toBe(1);
    expect((await post(source.endpoint)).count).toBe(2);
    expect(await post(source.endpoint)).toEqual({ count: 3, keys: ["count"], has: true });

    const own = (await storesOf(workspaceId)).find((store) => store.name === `${source.id}/dataStore`);
    expect(own?.id).toMatch(/^ds_/);
    expect(await recordsOf(own?.id as string)).toEqual([{ key: "count", value: 3, expires_at: null }]);
  });

  it("shares a named store between two sources of a workspace, and by its id with a third", async () => {
    const writer = await deploySource(OPERATOR, { dataStore: { name: "shared-e2e" } });
    const reader = await deploySource(OPERATOR, { dataStore: { name: "shared-e2e" } });
    expect(await post(writer.endpoint, { op: "set", args: ["greeting", { hello: "world" }] })).toEqual({
      result: "undefined",
    });
    expect(await post(reader.endpoint, { op: "get", args: ["greeting"] })).toEqual({ result: { hello: "world" } });

    const shared = (await storesOf(workspaceId)).filter((store) => store.name === "shared-e2e");
    expect(shared).toHaveLength(1);
    const byId = await deploySource(OPERATOR, { dataStore: shared[0]?.id });
    expect(await post(byId.endpoint, { op: "has", args: ["greeting"] })).toEqual({ result: true });
  });

  it("serves the original's methods: entries, for await, delete, clear, TTLs, and missing keys as undefined", async () => {
    const source = await deploySource(OPERATOR, { dataStore: { name: "methods-e2e" } });
    const run = (op: string, ...args: unknown[]) => post(source.endpoint, { op, args });
    await run("set", "b", [1, 2]);
    await run("set", "a", "");
    await run("set", "temp", "x", { ttl: 3600 });
    expect(await run("get", "missing")).toEqual({ result: "undefined" });
    expect(await run("get", "a")).toEqual({ result: "" });
    expect(await run("entries")).toEqual({
      result: [
        ["a", ""],
        ["b", [1, 2]],
        ["temp", "x"],
      ],
    });
    expect(await run("iterate")).toEqual({ result: { a: "", b: [1, 2], temp: "x" } });

    const store = (await storesOf(workspaceId)).find((found) => found.name === "methods-e2e");
    const temp = (await recordsOf(store?.id as string)).find((record) => record.key === "temp");
    const expires = Date.parse(temp?.expires_at as string);
    expect(expires - Date.now()).toBeGreaterThan(3500_000);
    expect(expires - Date.now()).toBeLessThanOrEqual(3600_000);
    expect(await run("setTtl", "temp", null)).toEqual({ result: true });
    expect((await recordsOf(store?.id as string)).find((record) => record.key === "temp")?.expires_at).toBeNull();
    expect(await run("setTtl", "nothing", 60)).toEqual({ result: false });
    expect(await run("set", "bad", 1, { ttl: -5 })).toEqual({ error: expect.stringContaining("ttl must be") });

    expect(await run("delete", "b")).toEqual({ result: true });
    expect(await run("delete", "b")).toEqual({ result: false });
    expect(await run("keys")).toEqual({ result: ["a", "temp"] });
    expect(await run("clear")).toEqual({ result: "undefined" });
    expect(await run("keys")).toEqual({ result: [] });
  });

  it("refuses values over the size limit with an error the code can catch", async () => {
    const source = await deploySource(OPERATOR, { dataStore: { name: "limits-e2e" } });
    const huge = "x".repeat(300 * 1024);
    expect(await post(source.endpoint, { op: "set", args: ["big", huge] })).toEqual({
      error: expect.stringMatching(/over the limit of 262144/),
    });
    expect(await post(source.endpoint, { op: "keys" })).toEqual({ result: [] });
  });

  it("lets a workflow action step keep state in a named store across runs", async () => {
    const step = `
      export default defineComponent({
        props: { store: { type: "data_store" } },
        async run({ steps, $ }) {
          const runs = ((await this.store.get("runs")) ?? 0) + 1;
          await this.store.set("runs", runs);
          await $.respond({ status: 200, body: { runs } });
        },
      });
    `;
    const flow = await createHttpWorkflow(
      api,
      "store flow",
      [{ namespace: "count", code: step, props: { store: { name: "flow-e2e" } } }],
      true,
    );
    expect(await post(flow.url)).toEqual({ runs: 1 });
    expect(await post(flow.url)).toEqual({ runs: 2 });
    const store = (await storesOf(workspaceId)).find((found) => found.name === "flow-e2e");
    expect(await recordsOf(store?.id as string)).toEqual([{ key: "runs", value: 2, expires_at: null }]);
  });

  it("keeps workspaces apart: another workspace's id is not found, from a run and over REST", async () => {
    const mine = await deploySource(OPERATOR, { dataStore: { name: "private-e2e" } });
    await post(mine.endpoint, { op: "set", args: ["secret", "mine only"] });
    const store = (await storesOf(workspaceId)).find((found) => found.name === "private-e2e");
    const storeId = store?.id as string;

    const { stdout } = await runSluice(["create-user", "--username", "ds-other", "--email", "ds-other@example.com"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    const other = apiClient(sluice.baseUrl, JSON.parse(stdout).api_key);
    const otherWorkspace = (await other("GET", "/users/me")).json.data.orgs[0].id as string;

    const thief = await deploySource(OPERATOR, { dataStore: storeId }, other);
    for (const op of ["get", "keys", "clear"]) {
      expect(await post(thief.endpoint, { op, args: ["secret"] })).toEqual({
        error: `data store ${storeId} not found in this workspace`,
      });
    }
    // The same name in the other workspace is another store.
    const namesake = await deploySource(OPERATOR, { dataStore: { name: "private-e2e" } }, other);
    expect(await post(namesake.endpoint, { op: "get", args: ["secret"] })).toEqual({ result: "undefined" });

    expect((await other("GET", `/data_stores/${storeId}/records`)).status).toBe(404);
    expect((await other("DELETE", `/data_stores/${storeId}/records`)).status).toBe(404);
    expect((await other("DELETE", `/data_stores/${storeId}`)).status).toBe(404);
    expect((await other("GET", `/workspaces/${workspaceId}/data_stores`)).status).toBe(404);
    expect((await storesOf(otherWorkspace, other)).map((found) => found.id)).not.toContain(storeId);
    expect(await recordsOf(storeId)).toEqual([{ key: "secret", value: "mine only", expires_at: null }]);
  });

  it("clears and deletes a store over REST; a prop bound by name then gets a fresh store", async () => {
    const source = await deploySource(OPERATOR, { dataStore: { name: "rest-e2e" } });
    await post(source.endpoint, { op: "set", args: ["k", 1] });
    const store = (await storesOf(workspaceId)).find((found) => found.name === "rest-e2e");
    const storeId = store?.id as string;

    expect(await api("DELETE", `/data_stores/${storeId}/records`)).toEqual({
      status: 200,
      json: { data: { id: storeId, cleared: true } },
    });
    expect(await recordsOf(storeId)).toEqual([]);
    await post(source.endpoint, { op: "set", args: ["k", 2] });
    expect(await api("DELETE", `/data_stores/${storeId}`)).toEqual({
      status: 200,
      json: { data: { id: storeId, deleted: true } },
    });
    expect((await api("GET", `/data_stores/${storeId}/records`)).status).toBe(404);
    expect(await post(source.endpoint, { op: "get", args: ["k"] })).toEqual({ result: "undefined" });
    const fresh = (await storesOf(workspaceId)).find((found) => found.name === "rest-e2e");
    expect(fresh?.id).toMatch(/^ds_/);
    expect(fresh?.id).not.toBe(storeId);
  });

  it("refuses a configured value that is no data store at deploy", async () => {
    const answer = await api("POST", "/sources", { component_code: OPERATOR, configured_props: { dataStore: 42 } });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toMatch(/configured_props.dataStore: must be a data store id/);
  });
});
