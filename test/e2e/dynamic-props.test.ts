import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_OPTIONS_PER_PAGE } from "#core/prop-options";
import { apiClient } from "../support/api-client.ts";
import { runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";

/**
 * Dynamic props against `npm start` (docs/components.md "Dynamic props"): `POST
 * /components/configure` pages through a prop's async options, and `POST /components/props` runs
 * `additionalProps`, on components written in the registry's idioms whose options call a stand-in
 * API on 127.0.0.1 through @pipedream/platform's axios. What misbehaving code does (throws, hangs,
 * answers too much or the wrong shape) comes back in `errors` of a 200.
 */

const TIMEOUT_MS = 3000;
/**
 * Idle sandbox children go after this long. Under load, a cold child that evaluates a large
 * bundle (axios inlined) can be taken for blocked before it starts the run; the run then waits,
 * held, until an idle child of its pool is reaped (60 s by default), longer than a test may take.
 * That is the pool's behaviour for any source's first run, not this endpoint's (see the report of
 * issue 15); a short idle time bounds the wait.
 */
const IDLE_MS = 5000;
const fixture = (name: string, api: string) =>
  readFileSync(new URL(`../fixtures/components/dynamic-props/${name}`, import.meta.url), "utf8").replaceAll(
    "__STAND_IN_API__",
    api,
  );

const REPOS = ["octo/alpha", "octo/beta", "octo/gamma", "octo/delta", "octo/epsilon"];
const TOPICS = [
  { slug: "cli", title: "Command line" },
  { slug: "bots", title: "Bots" },
  { slug: "build", title: "Build tools" },
];

/** The stand-in API: pages of repos and branches, cursor pages of topics, sheet headers. */
function standInApi(requests: string[]): Server {
  return createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    requests.push(`${url.pathname}${url.search}`);
    const page = Number(url.searchParams.get("page") ?? "1");
    const perPage = Number(url.searchParams.get("per_page") ?? "2");
    const slice = <T>(items: T[]) => items.slice((page - 1) * perPage, page * perPage);
    let body: unknown = { message: "Not Found" };
    let status = 200;
    const branches = /^\/repos\/(\w+\/\w+)\/branches$/.exec(url.pathname);
    if (url.pathname === "/user/repos") body = slice(REPOS.map((full_name) => ({ full_name })));
    else if (branches) {
      const repo = branches[1] ?? "";
      body = slice(
        ["main", "dev", `${repo.split("/")[1]}-feature`].map((name, i) => ({
          name,
          commit: { sha: `${i}abcdef0123` },
        })),
      );
    } else if (url.pathname === "/topics") {
      const query = url.searchParams.get("q") ?? "";
      const matching = TOPICS.filter((topic) => topic.slug.startsWith(query));
      const start = Number(url.searchParams.get("cursor") || "0");
      const next = start + 2 < matching.length ? String(start + 2) : null;
      body = { topics: matching.slice(start, start + 2), next };
    } else if (url.pathname === "/sheets/s1/headers") body = { headers: ["Name", "Email"] };
    else status = 404;
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(body));
  });
}

describe("dynamic props (local mode)", () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let server: Server;
  const requests: string[] = [];
  let gitId: string;
  let sheetId: string;
  let misbehavingId: string;
  let dataStoreKeysId: string;

  beforeAll(async () => {
    server = standInApi(requests);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    sluice = await startSluice({
      env: { SLUICE_INVOCATION_TIMEOUT_MS: String(TIMEOUT_MS), SLUICE_SANDBOX_IDLE_MS: String(IDLE_MS) },
    });
    api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    const save = async (code: string) => {
      const saved = await api("POST", "/components", { component_code: code });
      expect(saved.status, JSON.stringify(saved.json)).toBe(200);
      return saved.json.data.id as string;
    };
    gitId = await save(fixture("git-new-branch.mjs", base));
    sheetId = await save(fixture("sheet-add-row.mjs", base));
    misbehavingId = await save(fixture("misbehaving-options.mjs", base));
    dataStoreKeysId = await save(fixture("data-store-keys.mjs", base));
  }, 60_000);

  afterAll(async () => {
    await sluice?.stop();
    await new Promise((resolve) => server?.close(resolve));
  });

  const configure = (body: Record<string, unknown>) => api("POST", "/components/configure", body);

  it("marks async options as remoteOptions in configurable_props", async () => {
    const component = await api("GET", `/components/${gitId}`);
    const props = component.json.data.configurable_props;
    expect(props.find((prop: { name: string }) => prop.name === "repoFullName")).toMatchObject({
      type: "string",
      label: "Repository",
      remoteOptions: true,
    });
    expect(props.find((prop: { name: string }) => prop.name === "topic")).toMatchObject({
      useQuery: true,
      remoteOptions: true,
    });
  });

  it("pages through an app propDefinition's options({ page }) against the API", async () => {
    const pages: unknown[] = [];
    for (let page = 0; page < 4; page++) {
      const answer = await configure({ id: gitId, prop_name: "repoFullName", page, configured_props: {} });
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
      expect(answer.json).toMatchObject({ options: null, errors: [], observations: [], context: null });
      pages.push(answer.json.stringOptions);
    }
    expect(pages).toEqual([["octo/alpha", "octo/beta"], ["octo/gamma", "octo/delta"], ["octo/epsilon"], []]);
    for (const page of [1, 2, 3, 4]) expect(requests).toContain(`/user/repos?page=${page}&per_page=2`);
  });

  it("hands the configured props to a propDefinition's inputValues function", async () => {
    const answer = await configure({
      id: gitId,
      prop_name: "branch",
      configured_props: { repoFullName: "octo/gamma", timer: { intervalSeconds: 60 } },
    });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json).toMatchObject({
      stringOptions: null,
      options: [
        { label: "main (0abcdef)", value: "main" },
        { label: "dev (1abcdef)", value: "dev" },
      ],
      errors: [],
    });
    expect(requests).toContain("/repos/octo/gamma/branches?page=1&per_page=2");
  });

  it("pages with a context: context comes back, and prev_context gives the next page; query filters", async () => {
    const first = await configure({ id: gitId, prop_name: "topic" });
    expect(first.json).toMatchObject({
      options: [
        { label: "Command line", value: "cli" },
        { label: "Bots", value: "bots" },
      ],
      context: { nextPageToken: "2" },
      errors: [],
    });
    const second = await configure({ id: gitId, prop_name: "topic", page: 1, prev_context: first.json.context });
    expect(second.json).toMatchObject({ options: [{ label: "Build tools", value: "build" }], context: {}, errors: [] });
    const queried = await configure({ id: gitId, prop_name: "topic", query: "bu" });
    expect(queried.json.options).toEqual([{ label: "Build tools", value: "build" }]);
  });

  it("runs additionalProps on the configured props and answers the resulting prop set", async () => {
    const without = await api("POST", "/components/props", { id: sheetId, configured_props: { hasHeaders: false } });
    expect(without.status, JSON.stringify(without.json)).toBe(200);
    expect(without.json.errors).toEqual([]);
    expect(without.json.dynamicProps.id).toMatch(/^dyp_/);
    const names = (answer: typeof without) =>
      answer.json.dynamicProps.configurableProps.map((prop: { name: string }) => prop.name);
    expect(names(without)).toEqual(["standInSheets", "sheetId", "worksheet", "hasHeaders", "myColumnData"]);

    const body = { id: sheetId, configured_props: { sheetId: "s1", hasHeaders: true } };
    const withHeaders = await api("POST", "/components/props", body);
    expect(withHeaders.json.dynamicProps.configurableProps.slice(3)).toEqual([
      {
        name: "hasHeaders",
        type: "boolean",
        label: "Does the first row of the sheet have headers?",
        reloadProps: true,
      },
      { name: "col_0000", type: "string", label: "Name", optional: true },
      { name: "col_0001", type: "string", label: "Email", optional: true },
      { name: "valueInputOption", type: "string", label: "Value Input Option", remoteOptions: true },
    ]);
    expect(withHeaders.json.dynamicProps.id).not.toBe(without.json.dynamicProps.id);
    // The same configuration makes the same set, under the same id.
    const again = await api("POST", "/components/props", {
      ...body,
      dynamic_props_id: withHeaders.json.dynamicProps.id,
    });
    expect(again.json.dynamicProps).toEqual(withHeaders.json.dynamicProps);
  });

  it("configures a prop that additionalProps returned, and a static prop's remote options", async () => {
    const dynamic = await configure({
      id: sheetId,
      prop_name: "valueInputOption",
      configured_props: { sheetId: "s1", hasHeaders: true, col_0000: "Ada" },
    });
    expect(dynamic.json).toMatchObject({
      options: [
        { label: "Raw", value: "RAW" },
        { label: "As entered", value: "USER_ENTERED" },
      ],
      errors: [],
    });
    const worksheet = await configure({ id: sheetId, prop_name: "worksheet" });
    expect(worksheet.json).toMatchObject({ stringOptions: ["Sheet1", "Archive"], options: null, errors: [] });
  });

  it("answers a registry component's prop set by key", async () => {
    const answer = await api("POST", "/components/props", { id: "http-new-requests" });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json.dynamicProps.configurableProps[0]).toMatchObject({ type: "$.interface.http" });
  });

  it("puts what options() threw in errors and its console lines in observations, with a 200", async () => {
    const answer = await configure({ id: misbehavingId, prop_name: "throws" });
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({ options: null, stringOptions: null, context: null });
    expect(JSON.parse(answer.json.errors[0])).toEqual({ name: "Error", message: "the API answered 401 Unauthorized" });
    expect(answer.json.observations).toEqual([
      { k: "console.log", msg: "listing the things", ts: expect.any(Number) },
      { k: "error", err: { name: "Error", message: "the API answered 401 Unauthorized" }, ts: expect.any(Number) },
    ]);
  });

  it("stops an options() that never settles at the time limit", async () => {
    const answer = await configure({ id: misbehavingId, prop_name: "hangs" });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.json.errors[0])).toMatchObject({ name: "TimeoutError" });
  });

  it("refuses answers over the bounds or of the wrong shape, in errors", async () => {
    const cases: Array<[string, RegExp]> = [
      ["tooMany", new RegExp(`20001 options; one page may hold at most ${MAX_OPTIONS_PER_PAGE}`)],
      ["notAList", /must return an array of options or \{options, context\}/],
      ["badLabel", /options\(\)\[0\]\.label must be a string/],
      ["plain", /the prop "plain" has no options/],
      ["nope", /"nope" is not a prop of this component/],
    ];
    for (const [prop, message] of cases) {
      const answer = await configure({ id: misbehavingId, prop_name: prop });
      expect(answer.status, prop).toBe(200);
      expect(answer.json.options, prop).toBeNull();
      expect(JSON.parse(answer.json.errors[0]).message, prop).toMatch(message);
    }
  });

  it("refuses a configured value of the wrong type, naming the prop", async () => {
    const answer = await configure({ id: sheetId, prop_name: "worksheet", configured_props: { hasHeaders: "yes" } });
    expect(answer.status).toBe(400);
    expect(answer.json.details).toEqual([{ field: "configured_props.hasHeaders", message: expect.any(String) }]);
  });

  it("binds a data_store prop in options() as in a run: this.<prop> and an inputValues function reach the store", async () => {
    const named = { dataStore: { name: "configure-orders" } };
    const keys = async (configured: Record<string, unknown>) => {
      const answer = await configure({ id: dataStoreKeysId, prop_name: "key", configured_props: configured });
      expect(answer.status, JSON.stringify(answer.json)).toBe(200);
      expect(answer.json.errors, JSON.stringify(answer.json)).toEqual([]);
      return answer.json.stringOptions;
    };
    // `{name}` finds or creates the store, as a run does: empty at first.
    expect(await keys(named)).toEqual([]);
    // options() reading `this.dataStore` directly, and writing to it (calls are served as a run's).
    const recent = await configure({ id: dataStoreKeysId, prop_name: "recentKeys", configured_props: named });
    expect(recent.json).toMatchObject({ errors: [], options: [{ label: "listings (listing 1)", value: "listings" }] });
    expect(await keys(named)).toEqual(["listings"]);

    const workspace = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const stores = await api("GET", `/workspaces/${workspace}/data_stores`);
    const store = stores.json.data.find((entry: { name: string }) => entry.name === "configure-orders");
    expect(store?.id).toMatch(/^ds_/);
    // A ds_ id binds the same store.
    expect(await keys({ dataStore: store.id })).toEqual(["listings"]);

    // An unset prop has no store yet (the source it would be a store of does not exist): its methods say so.
    const unset = await configure({ id: dataStoreKeysId, prop_name: "key", configured_props: {} });
    expect(unset.status).toBe(200);
    expect(JSON.parse(unset.json.errors[0]).message).toMatch(/has no store yet/);
    // A store of another workspace (or none) is not found, as in a run.
    const foreign = await configure({
      id: dataStoreKeysId,
      prop_name: "key",
      configured_props: { dataStore: `ds_${"0".repeat(22)}` },
    });
    expect(JSON.parse(foreign.json.errors[0]).message).toMatch(/not found in this workspace/);
  });

  it("answers the same at the Connect API's paths, /v1/connect/{project_id}/{components,actions,triggers}/...", async () => {
    const workspace = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const [project] = (await api("GET", `/workspaces/${workspace}/projects`)).json.data;
    const connect = (what: string, body: Record<string, unknown>, kind = "components") =>
      api("POST", `/connect/${project.id}/${kind}/${what}`, body);
    const configureBody = { id: gitId, prop_name: "repoFullName", page: 1, configured_props: {} };
    const propsBody = { id: sheetId, configured_props: { hasHeaders: true, sheetId: "s1" } };
    const direct = {
      configure: (await configure(configureBody)).json,
      props: (await api("POST", "/components/props", propsBody)).json,
    };
    expect(direct.configure.stringOptions).toEqual(["octo/gamma", "octo/delta"]);
    // The Connect SDK calls the actions' and triggers' forms too: all three answer alike.
    for (const kind of ["components", "actions", "triggers"]) {
      const viaConnect = await connect("configure", configureBody, kind);
      expect(viaConnect.status, JSON.stringify(viaConnect.json)).toBe(200);
      expect(viaConnect.json).toEqual(direct.configure);
      const props = await connect("props", propsBody, kind);
      expect(props.status, JSON.stringify(props.json)).toBe(200);
      expect(props.json).toEqual(direct.props);
    }
    // Another word there is a route that does not exist.
    const unknown = await connect("props", propsBody, "sources");
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toBe(`no route for POST /v1/connect/${project.id}/sources/props`);
    // The project fixes the workspace: naming another is a 400; its own is fine.
    expect((await connect("props", { ...propsBody, workspace_id: workspace })).status).toBe(200);
    const other = await connect("props", { ...propsBody, org_id: `o_${"0".repeat(22)}` });
    expect(other.status).toBe(400);
    expect(other.json.details).toEqual([{ field: "org_id", message: "names another workspace than the project's" }]);
    // A project that is not the caller's is 404 before the body is read, as a missing one.
    const missing = await api("POST", `/connect/proj_${"0".repeat(22)}/components/configure`, {});
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatch(/project not found/);
  });

  it("answers 404 for a component of another user, as for one that does not exist", async () => {
    const { stdout } = await runSluice(["create-user", "--username", "other", "--email", "other@example.com"], {
      SLUICE_DATA_DIR: sluice.dataDir,
    });
    const other = apiClient(sluice.baseUrl, JSON.parse(stdout).api_key);
    for (const [path, body] of [
      ["/components/configure", { id: gitId, prop_name: "repoFullName" }],
      ["/components/props", { id: sheetId }],
    ] as const) {
      const theirs = await other("POST", path, body);
      expect(theirs.status).toBe(404);
      const missing = await other("POST", path, { ...body, id: `${body.id.slice(0, 3)}${"0".repeat(22)}` });
      expect(theirs.json.error).toBe(missing.json.error);
    }
  });
});
