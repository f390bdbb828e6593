import { chmodSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundledNpmCli, runNpmPack } from "#adapters/npm/npm-cli";
import { apiClient, createHttpWorkflow } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import {
  REPO_ROOT,
  runSluiceBin,
  type SluiceCommand,
  type SluiceProcess,
  spawnSluiceBin,
  startSluice,
} from "../support/local-process.ts";
import { startNpmRegistry } from "../support/npm-registry-fixture.ts";
import { type StandInOAuthProvider, startStandInOAuthProvider } from "../support/oauth-provider.ts";
import { REGISTRY_TREE } from "../support/registry-tree.ts";

/*
 * The `sluice` command line as a user runs it: the installed bin (bin/sluice.mjs by its shebang),
 * in a folder of the user's, against a real local mode, with its profile in a temporary
 * XDG_CONFIG_HOME. Every command is a real child process; long-running ones (events -f, logs -f,
 * dev) are stopped with SIGINT as Ctrl-C stops them.
 */

/** Stops a command as Ctrl-C does; resolves with how it ended. */
async function stopWithCtrlC(command: SluiceCommand) {
  command.child.kill("SIGINT");
  return command.exited;
}

const HELLO = `export default {
  name: "Hello",
  version: "0.1.0",
  props: {
    http: { type: "$.interface.http", customResponse: true },
    greeting: { type: "string", default: "Hello" },
    times: { type: "integer", default: 1 },
  },
  async run(event) {
    if (event.body?.fail) throw new Error("asked to fail: " + event.body.fail);
    console.log("visit from", event.body?.name);
    this.$emit({ name: event.body?.name }, { summary: "visit" });
    this.http.respond({ status: 200, body: { message: (this.greeting + ", " + event.body?.name).repeat(this.times) } });
  },
};
`;

const ACTION = `export default {
  key: "cli-test-add",
  name: "Add",
  version: "0.0.1",
  type: "action",
  props: { a: { type: "integer" }, b: { type: "integer" } },
  async run() { return this.a + this.b; },
};
`;

describe("the sluice command line against local mode", { timeout: 60_000 }, () => {
  let sluice: SluiceProcess;
  let api: ReturnType<typeof apiClient>;
  let key: string;
  let root: string;
  let work: string;
  const config = mkdtempSync(join(tmpdir(), "sluice-cli-config-"));
  const env = { XDG_CONFIG_HOME: config };
  const cli = (...args: string[]) => runSluiceBin(args, { env, cwd: work });
  const profile = join(config, "sluice", "config.json");
  const write = (name: string, text: string) => {
    mkdirSync(dirname(join(work, name)), { recursive: true });
    writeFileSync(join(work, name), text);
    return name;
  };
  const post = async (url: string, body: unknown) => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: await response.json().catch(() => undefined) };
  };
  const sourceIdIn = (text: string) => /\b(dc_[A-Za-z0-9_-]+)/.exec(text)?.[1] ?? "";
  const endpointIn = (text: string) => /endpoint: (\S+)/.exec(text)?.[1] ?? "";

  /** The OAuth provider of the app `acme` that `sluice accounts connect` connects. */
  let provider: StandInOAuthProvider;

  beforeAll(async () => {
    provider = await startStandInOAuthProvider();
    const appsFile = join(mkdtempSync(join(tmpdir(), "sluice-cli-apps-")), "apps.json");
    writeFileSync(appsFile, JSON.stringify({ apps: [provider.appEntry("acme")] }));
    // The provider is on 127.0.0.1: token requests and test requests may reach it.
    sluice = await startSluice({ env: { SLUICE_APPS_FILE: appsFile, SLUICE_WEBHOOK_ALLOW_PRIVATE: "true" } });
    key = sluice.apiKeyFromFile();
    api = apiClient(sluice.baseUrl, key);
    root = sluice.baseUrl.replace(/\/v1$/, "");
    work = mkdtempSync(join(tmpdir(), "sluice-cli-work-"));
  });
  afterAll(async () => {
    await sluice?.stop();
    await provider?.close();
  });

  it("says it is not logged in, and refuses a bad key at login without saving anything", async () => {
    const before = await cli("list", "sources");
    expect(before).toMatchObject({ code: 1, stdout: "" });
    expect(before.stderr).toBe("sluice: not logged in: run `sluice login` (or set SLUICE_URL and SLUICE_API_KEY)\n");
    const bad = await cli("login", "--url", root, "--key", "not-the-key-0123456789");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("refused this API key (401): nothing saved");
    expect(() => statSync(profile)).toThrow();
    // Not at a terminal, it cannot ask: it says what is missing instead of waiting.
    expect((await cli("login", "--url", root)).stderr).toContain("login needs --key when not run at a terminal");
  });

  it("logs in: checks the key, saves the profile readable by the user only, and never prints the key", async () => {
    const login = await cli("login", "--url", `${root}/v1`, "--key", key);
    expect(login.code).toBe(0);
    expect(login.stdout).toBe(`Logged in to ${root} as sluice; profile "default" saved in ${profile}\n`);
    expect(login.stdout + login.stderr).not.toContain(key);
    expect(statSync(profile).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(profile, "utf8"))).toEqual({ profiles: { default: { url: root, api_key: key } } });
  });

  it("deploys a single-file source with props coerced by their types, and lists it", async () => {
    const file = write("hello.mjs", HELLO);
    const deployed = await cli("deploy", file, "--prop", "greeting=007", "--prop", "times=2", "--name", "greeter");
    expect(deployed.code).toBe(0);
    expect(deployed.stderr).toContain("deploying hello.mjs…");
    const id = sourceIdIn(deployed.stdout);
    expect(deployed.stdout).toMatch(
      /^Deployed source "greeter" as dc_\S+\n {2}endpoint: http:\/\/127\.0\.0\.1:\d+\/http\/\S+\n$/,
    );
    const source = (await api("GET", `/sources/${id}`)).json.data;
    expect(source.configured_props).toMatchObject({ greeting: "007", times: 2 });
    expect(await post(endpointIn(deployed.stdout), { name: "Ada" })).toEqual({
      status: 200,
      json: { message: "007, Ada007, Ada" },
    });

    const listed = await cli("list", "sources", "--json");
    expect(JSON.parse(listed.stdout).map((each: { id: string }) => each.id)).toContain(id);
    const table = await cli("list", "sources");
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+NAME\s+ACTIVE\s+CREATED\s+ENDPOINT$/);
    expect(table.stdout).toMatch(new RegExp(`^${id}\\s+greeter\\s+true\\s`, "m"));
    const components = JSON.parse((await cli("list", "components", "--json")).stdout);
    expect(components.map((each: { id: string }) => each.id)).toContain(source.component_id);
  });

  it("deploys a multi-file component in the registry's layout: the entry and the app file it imports", async () => {
    write(
      "greeter-app/greeter-app.app.mjs",
      `export default {
  type: "app",
  app: "greeter_app",
  propDefinitions: {},
  methods: { greet(name) { return "Hi " + name + " from a sibling file"; } },
};
`,
    );
    const entry = write(
      "greeter-app/sources/new-greeting/new-greeting.mjs",
      `import app from "../../greeter-app.app.mjs";
export default {
  key: "greeter_app-new-greeting",
  name: "New Greeting",
  version: "0.0.1",
  type: "source",
  props: { app, http: { type: "$.interface.http", customResponse: true } },
  async run(event) {
    const text = this.app.greet(event.body?.name);
    this.$emit({ text }, { summary: text });
    this.http.respond({ status: 200, body: { text } });
  },
};
`,
    );
    const deployed = await cli("deploy", entry, "--root", "greeter-app");
    expect(deployed.code, deployed.stderr).toBe(0);
    const id = sourceIdIn(deployed.stdout);
    expect(await post(endpointIn(deployed.stdout), { name: "Ada" })).toEqual({
      status: 200,
      json: { text: "Hi Ada from a sibling file" },
    });
    const component = (await api("GET", `/components/${(await api("GET", `/sources/${id}`)).json.data.component_id}`))
      .json.data;
    expect(component.component_entry).toBe("sources/new-greeting/new-greeting.mjs");
    expect(Object.keys(component.component_files).sort()).toEqual([
      "greeter-app.app.mjs",
      "sources/new-greeting/new-greeting.mjs",
    ]);
  });

  it("deploys a source of the registry suite's tree as it is, naming its files from the checkout's root", async () => {
    const entry = join(REGISTRY_TREE, "components", "http_hooks", "sources", "new-requests", "new-requests.mjs");
    const deployed = await cli("deploy", entry, "--prop", "resStatusCode=201", "--prop", "resBody=thanks");
    expect(deployed.code, deployed.stderr).toBe(0);
    const answer = await fetch(endpointIn(deployed.stdout), { method: "POST", body: "{}" });
    expect({ status: answer.status, text: await answer.text() }).toEqual({ status: 201, text: "thanks" });
    const id = sourceIdIn(deployed.stdout);
    const component = (await api("GET", `/components/${(await api("GET", `/sources/${id}`)).json.data.component_id}`))
      .json.data;
    // The entry, the app file and the common base it spreads, below the repository (its .git).
    expect(component.component_entry).toBe(
      "test/fixtures/registry-tree/components/http_hooks/sources/new-requests/new-requests.mjs",
    );
    expect(Object.keys(component.component_files)).toContain(
      "test/fixtures/registry-tree/components/http_hooks/http_hooks.app.mjs",
    );
    await cli("delete", id);
  });

  it("lists the data stores of your workspaces, prints a store's records, clears it and deletes it", async () => {
    const counter = write(
      "counter.mjs",
      `export default {
  props: { http: { type: "$.interface.http", customResponse: true }, store: { type: "data_store" } },
  async run(event) {
    await this.store.set("visits", ((await this.store.get("visits")) ?? 0) + 1);
    await this.store.set("last", { name: event.body?.name ?? null });
    this.http.respond({ status: 200, body: "counted" });
  },
};
`,
    );
    const deployed = await cli("deploy", counter, "--prop", 'store={"name":"cli-visits"}');
    expect(deployed.code, deployed.stderr).toBe(0);
    for (const name of ["Ada", "Grace"]) expect((await post(endpointIn(deployed.stdout), { name })).status).toBe(200);
    const store = await eventually(async () => {
      const stores = JSON.parse((await cli("list", "data-stores", "--json")).stdout) as { id: string; name: string }[];
      return stores.find((each) => each.name === "cli-visits");
    }, "the store the runs created");
    const table = await cli("list", "data-stores");
    expect(table.stdout).toMatch(new RegExp(`^${store.id}\\s+cli-visits\\s+o_`, "m"));
    // Each request was answered after its run's writes.
    const held = JSON.parse((await cli("records", store.id, "--json")).stdout) as { key: string; value: unknown }[];
    expect(held.map((record) => [record.key, record.value])).toEqual([
      ["last", { name: "Grace" }],
      ["visits", 2],
    ]);
    const printed = await cli("records", store.id);
    expect(printed.stdout).toMatch(/^last\s+\{"name":"Grace"\}\s*$/m);
    expect((await cli("records", store.id, "--clear")).stdout).toBe(`Cleared data store ${store.id}\n`);
    expect(JSON.parse((await cli("records", store.id, "--json")).stdout)).toEqual([]);
    expect((await cli("delete", store.id)).stdout).toBe(`Deleted data store ${store.id}\n`);
    expect((await cli("records", store.id)).code).toBe(1);
    expect((await cli("records", "dc_nope")).stderr).toContain("is not a data store id");
  });

  it("saves an action as a component, deploying no source", async () => {
    const sources = (await api("GET", "/users/me/sources?limit=100")).json.data.length;
    const saved = await cli("deploy", write("add.mjs", ACTION), "--json");
    expect(saved.code).toBe(0);
    const component = JSON.parse(saved.stdout);
    expect(component).toMatchObject({ id: expect.stringMatching(/^sc_/), key: "cli-test-add", type: "action" });
    expect((await api("GET", `/components/${component.id}`)).json.data.type).toBe("action");
    expect((await api("GET", "/users/me/sources?limit=100")).json.data.length).toBe(sources);
  });

  it("prints events and logs (with an error's message and stack), and follows new events until Ctrl-C", async () => {
    const deployed = await cli("deploy", write("events.mjs", HELLO), "--json");
    const source = JSON.parse(deployed.stdout);
    const endpoint = source.configured_props.http.endpoint_url;
    await post(endpoint, { name: "Ada" });
    await post(endpoint, { fail: "on purpose" });

    const events = await cli("events", source.id, "-n", "5");
    expect(events.code).toBe(0);
    expect(events.stdout).toMatch(/^\d{4}-\d\d-\d\dT\S+Z {2}default {2}\{"name":"Ada"\}\n$/);
    const logs = await eventually(async () => {
      const run = await cli("logs", source.id);
      return when(run.stdout.includes("ERROR")) && run;
    }, "the error in the logs");
    expect(logs.stdout).toMatch(/ {2}log {4}visit from Ada\n/);
    expect(logs.stdout).toMatch(/ {2}ERROR {2}Error: asked to fail: on purpose \(in run\)\n {4}at /);

    const follow = spawnSluiceBin(["events", source.id, "-n", "1", "-f", "--json"], { env, cwd: work });
    // -n 1: the newest of both channels (the error), then each channel from after its own newest,
    // so nothing is missed however late this process starts streaming.
    const logsFollow = spawnSluiceBin(["logs", source.id, "-n", "1", "-f"], { env, cwd: work });
    // The newest event first, then what comes: wait for the first, then make one.
    await eventually(() => when(follow.stdout().includes('"Ada"')), "the newest event");
    await eventually(() => when(logsFollow.stdout().includes("ERROR")), "the newest of the logs and errors");
    await post(endpoint, { name: "Grace" });
    await eventually(() => when(follow.stdout().includes('"Grace"')), "the followed event", { timeoutMs: 20_000 });
    await eventually(() => when(logsFollow.stdout().includes("visit from Grace")), "the followed log", {
      timeoutMs: 20_000,
    });
    expect(await stopWithCtrlC(follow)).toEqual({ code: 0, signal: null });
    expect(await stopWithCtrlC(logsFollow)).toEqual({ code: 0, signal: null });
    const lines = follow
      .stdout()
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines.map((line) => line.event)).toEqual([{ name: "Ada" }, { name: "Grace" }]);
    expect(logsFollow.stdout()).toMatch(/^\S+ {2}ERROR {2}Error: asked to fail: on purpose/);
    expect(logsFollow.stdout()).not.toContain("visit from Ada");
  });

  it("lists a workflow, prints what it emitted, and deletes it by its p_ id", async () => {
    const code = `export default defineComponent({ async run({ steps, $ }) {
      console.log("got", steps.trigger.event.body.n);
      if (steps.trigger.event.body.n > 1) throw new TypeError("too many");
      $.send.emit({ raw_event: { got: steps.trigger.event.body } });
    } });`;
    const workflow = await createHttpWorkflow(api, "cli-flow", [{ namespace: "emit", code }], false);
    await post(workflow.url, { n: 1 });
    const listed = await cli("list", "workflows");
    expect(listed.stdout).toMatch(new RegExp(`^${workflow.id}\\s+cli-flow\\s+true\\s+1\\s`, "m"));
    const emitted = await eventually(async () => {
      const run = await cli("events", workflow.id, "--json");
      return when(run.stdout.trim() !== "") && run;
    }, "the workflow's event");
    expect(JSON.parse(emitted.stdout).event).toEqual({ raw_event: { got: { n: 1 } } });
    expect(await cli("events", workflow.id, "-f")).toMatchObject({ code: 2 });
    await post(workflow.url, { n: 2 });
    const runs = await eventually(async () => {
      const run = await cli("logs", workflow.id, "-n", "5");
      return when(run.stdout.includes("ERROR")) && run;
    }, "the failed run in the logs");
    const lines = runs.stdout.trim().split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/ {2}run run_\S+ {2}success in \d+ ms$/);
    expect(lines[1]).toMatch(/ {2}log {4}\[emit\] got 1$/);
    expect(lines[2]).toMatch(/ {2}run run_\S+ {2}error in \d+ ms$/);
    expect(lines[3]).toMatch(/ {2}log {4}\[emit\] got 2$/);
    expect(lines[4]).toMatch(/ {2}ERROR {2}TypeError: too many \(in emit\)$/);
    expect(await cli("delete", workflow.id)).toMatchObject({ code: 0, stdout: `Deleted workflow ${workflow.id}\n` });
    expect((await api("GET", `/workflows/${workflow.id}`)).status).toBe(404);
  });

  it("updates a source from a file: same id, props kept", async () => {
    const created = JSON.parse(
      (await cli("deploy", write("upd.mjs", HELLO), "--prop", "greeting=Hi", "--json")).stdout,
    );
    const updated = await cli("update", created.id, write("upd.mjs", HELLO.replace('", "', '"! "')));
    expect(updated.code).toBe(0);
    expect(updated.stdout).toContain(`Updated source "${created.name}" (${created.id})`);
    expect(await post(created.configured_props.http.endpoint_url, { name: "Ada" })).toMatchObject({
      json: { message: "Hi! Ada" },
    });
    // New props by name, coerced by their declared types; the others kept.
    const again = await cli("update", created.id, "upd.mjs", "--prop", "times=2", "--json");
    expect(JSON.parse(again.stdout)).toMatchObject({ id: created.id, configured_props: { greeting: "Hi", times: 2 } });
    expect(await post(created.configured_props.http.endpoint_url, { name: "Ada" })).toMatchObject({
      json: { message: "Hi! AdaHi! Ada" },
    });
  });

  it("deletes by the id's prefix: a source, a webhook, a subscription; refuses what it cannot delete", async () => {
    const source = JSON.parse((await cli("deploy", write("gone.mjs", HELLO), "--json")).stdout);
    // An "id" that walks the path to another route is no id: refused before any request.
    for (const [command, id] of [
      ["delete", `wh_x/../../sources/${source.id}`],
      ["delete", `dc_zz/../../sources/${source.id}/events`],
      ["events", `dc_x/../${source.id}`],
      ["records", "ds_x/../../data_stores/ds_y"],
    ] as const) {
      expect((await cli(command, id)).code, `${command} ${id}`).toBe(2);
    }
    expect((await api("GET", `/sources/${source.id}`)).status).toBe(200);
    const webhook = (await api("POST", "/webhooks?url=http://127.0.0.1:9/hook")).json.data;
    const sub = (await api("POST", `/subscriptions?emitter_id=${source.id}&listener_id=${webhook.id}`)).json.data;
    expect(await cli("delete", sub.id)).toMatchObject({ code: 0, stdout: `Deleted subscription ${sub.id}\n` });
    expect(
      (await api("GET", "/users/me/subscriptions")).json.data.map((each: { id: string }) => each.id),
    ).not.toContain(sub.id);
    expect(await cli("delete", webhook.id)).toMatchObject({ code: 0, stdout: `Deleted webhook ${webhook.id}\n` });
    expect((await api("GET", `/webhooks/${webhook.id}`)).status).toBe(404);
    expect(await cli("delete", source.id)).toMatchObject({ code: 0, stdout: `Deleted source ${source.id}\n` });
    expect((await api("GET", `/sources/${source.id}`)).status).toBe(404);

    // Gone already: the API's message, not a stack.
    const again = await cli("delete", source.id);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^sluice: .*not found.* \(404\)\n$/);
    expect((await cli("delete", "sc_0123")).code).toBe(2);
    expect((await cli("delete", "sc_0123")).stderr).toContain("is not an id that can be deleted");
  });

  it("accounts connect: opens the consent page with $BROWSER, waits for the callback's account and prints it", async () => {
    // The "browser" follows the provider's redirect back to Sluice's callback, as a person approving would.
    const browser = write("browser.sh", '#!/bin/sh\nexec curl -sS -L -o "$(dirname "$0")/callback.html" "$1"\n');
    chmodSync(join(work, browser), 0o755);
    const connected = await runSluiceBin(
      ["accounts", "connect", "acme", "--name", "Work Acme", "--wait", "20", "--json"],
      {
        env: { ...env, BROWSER: join(work, browser) },
        cwd: work,
      },
    );
    expect(connected.code, connected.stderr).toBe(0);
    expect(connected.stderr).toContain(`${provider.origin}/authorize?`);
    const account = JSON.parse(connected.stdout);
    expect(account).toEqual({ id: expect.stringMatching(/^apn_/), name: "Work Acme" });
    expect(readFileSync(join(work, "callback.html"), "utf8")).toContain(account.id);
    const read = await api("GET", `/accounts/${account.id}?include_credentials=1`);
    expect(read.json.data).toMatchObject({ healthy: true, app: { name: "Stand-in" } });
    expect(read.json.data.credentials.oauth_access_token).toEqual(expect.any(String));
    // Without a way to open a browser it still prints the URL, and waits (here: not long) for nothing.
    const alone = await runSluiceBin(["accounts", "connect", "acme", "--wait", "1"], {
      env: { ...env, BROWSER: join(work, "no-such-browser") },
      cwd: work,
    });
    expect(alone.code).toBe(1);
    expect(alone.stdout).toContain(`${provider.origin}/authorize?`);
    expect(alone.stderr).toContain("no account of acme appeared within 1 s");
  });

  it("says a key is refused instead of listing nothing, and prints an API error without a stack", async () => {
    const refused = await runSluiceBin(["list", "sources"], {
      env: { ...env, SLUICE_API_KEY: "wrong-key-0123456789abcdef" },
      cwd: work,
    });
    expect(refused).toMatchObject({ code: 1, stdout: "" });
    expect(refused.stderr).toContain(`the API key was refused by ${root} (401`);
    expect(refused.stderr).toContain("SLUICE_API_KEY holds a key this Sluice does not know");

    const broken = await cli("deploy", write("broken.mjs", "export default { name: 'Broken', props: { ,"));
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/^deploying broken\.mjs…\nsluice: .*component_code.*\(400\)/);
    expect(broken.stderr).not.toMatch(/\n\s+at /);

    // A port that was free a moment ago: nothing listens there.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = await runSluiceBin(["list", "sources"], {
      env: { ...env, SLUICE_URL: `http://127.0.0.1:${port}` },
      cwd: work,
    });
    expect(unreachable).toMatchObject({
      code: 1,
      stderr: `sluice: cannot reach http://127.0.0.1:${port}: ECONNREFUSED\n`,
    });
  });

  it("--help on any command prints its help and does nothing: create-key makes no key, deploy deploys nothing", async () => {
    const keyFile = join(sluice.dataDir, "api-key");
    const keyBefore = readFileSync(keyFile, "utf8");
    const help = await runSluiceBin(["create-key", "--help"], { env: { ...env, SLUICE_DATA_DIR: sluice.dataDir } });
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toMatch(/^Usage: sluice create-key/);
    expect(readFileSync(keyFile, "utf8")).toBe(keyBefore);

    const sources = (await api("GET", "/users/me/sources?limit=100")).json.data.length;
    const deployHelp = await cli("deploy", write("nothing.mjs", HELLO), "--help");
    expect(deployHelp.stdout).toMatch(/^Usage: sluice deploy <file>/);
    expect((await api("GET", "/users/me/sources?limit=100")).json.data.length).toBe(sources);

    expect(await cli("deplyo", "x.mjs")).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^sluice: unknown command "deplyo"/),
    });
    expect(await cli("list", "sources", "--bogus")).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^sluice: list: Unknown option '--bogus'/),
    });
    const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version;
    expect(await cli("--version")).toMatchObject({ code: 0, stdout: `sluice ${version}\n` });
  });

  it("registry add: puts an npm package of the registry into the data dir's registry, served by key while Sluice runs", async () => {
    // The installed dev dependency, packed as npm publishes it: no network.
    const tarball = await runNpmPack(join(REPO_ROOT, "node_modules", "@pipedream", "helper_functions"), work, {
      cli: bundledNpmCli(),
      home: undefined,
      registry: undefined,
      timeoutMs: 60_000,
    });
    const local = { ...env, SLUICE_DATA_DIR: sluice.dataDir };
    const key = "helper_functions-prettify-json";
    expect((await api("GET", `/components/registry/${key}`)).status).toBe(404);
    const added = await runSluiceBin(["registry", "add", `./${tarball.split("/").pop()}`], { env: local, cwd: work });
    expect(added).toMatchObject({ code: 0 });
    expect(added.stdout).toMatch(
      new RegExp(
        `^Added @pipedream/helper_functions \\S+ in ${join(sluice.dataDir, "registry", "helper_functions")}: 24 component\\(s\\) with a key\n`,
      ),
    );
    expect(added.stdout).toContain(`  ${key}\n`);
    // Served without a restart, with the app file its code imports.
    const served = await api("GET", `/components/registry/${key}`);
    expect(served.status).toBe(200);
    expect(served.json.data).toMatchObject({ key, name: "Pretty Print JSON" });

    // By name, from an npm registry (a stand-in on 127.0.0.1), with --dir and --json.
    const npm = await startNpmRegistry([
      {
        name: "@pipedream/cli_notes",
        version: "1.2.0",
        files: {
          "actions/note/note.mjs":
            'export default { key: "cli_notes-note", type: "action", version: "0.0.1", async run() { return 1; } };',
        },
      },
    ]);
    try {
      const dir = join(work, "other-registry");
      const byName = await runSluiceBin(["registry", "add", "@pipedream/cli_notes@1.2.0", "--dir", dir, "--json"], {
        env: { ...local, SLUICE_NPM_REGISTRY: npm.url },
        cwd: work,
      });
      expect(byName).toMatchObject({ code: 0 });
      expect(JSON.parse(byName.stdout)).toEqual({
        package: "@pipedream/cli_notes",
        version: "1.2.0",
        dir: join(dir, "cli_notes"),
        replaced: false,
        components: [{ key: "cli_notes-note", path: join(dir, "cli_notes", "actions", "note", "note.mjs") }],
        shadowed: [],
      });
      expect(npm.tarballRequests("@pipedream/cli_notes")).toBe(1);
    } finally {
      await npm.close();
    }

    const badName = await runSluiceBin(["registry", "add", "Not A Package"], { env: local, cwd: work });
    expect(badName).toEqual({
      code: 2,
      stdout: "",
      stderr:
        'sluice: registry add: "Not A Package" is not an npm package name (such as @pipedream/helper_functions) or a .tgz file\n',
    });
  });

  it("dev: deploys, redeploys each save under the same id with its props, streams logs and events, and leaves the source on Ctrl-C", async () => {
    const file = write("dev/source.mjs", HELLO);
    const dev = spawnSluiceBin(["dev", file, "--prop", "greeting=Hey"], { env, cwd: work, timeoutMs: 90_000 });
    await eventually(() => when(dev.stderr().includes("Watching 1 file(s)")), "dev to deploy and watch", {
      timeoutMs: 30_000,
    });
    const id = sourceIdIn(dev.stderr());
    const endpoint = endpointIn(dev.stderr());
    expect(await post(endpoint, { name: "Ada" })).toMatchObject({ json: { message: "Hey, Ada" } });

    write(file, HELLO.replace('", "', '", dear "'));
    await eventually(() => when(dev.stderr().includes(`Redeployed source.mjs to ${id}`)), "the redeploy", {
      timeoutMs: 30_000,
    });
    expect(await post(endpoint, { name: "Grace" })).toMatchObject({ json: { message: "Hey, dear Grace" } });
    // A save that does not load: the error is shown, the source keeps its last code, dev goes on.
    write(file, "export default { props: { ,");
    await eventually(() => when(dev.stderr().includes("the source keeps its last code")), "the refused save", {
      timeoutMs: 30_000,
    });
    expect(await post(endpoint, { name: "Lin" })).toMatchObject({ json: { message: "Hey, dear Lin" } });
    await eventually(() => when(dev.stdout().includes("visit from Lin")), "the streamed log", { timeoutMs: 20_000 });
    await eventually(() => when(dev.stdout().includes('event default  {"name":"Lin"}')), "the streamed event");

    expect(await stopWithCtrlC(dev)).toEqual({ code: 0, signal: null });
    expect(dev.stderr()).toContain(`Left source ${id} deployed; delete it with: sluice delete ${id}`);
    const sources = (await api("GET", "/users/me/sources?limit=100")).json.data;
    expect(sources.filter((each: { id: string }) => each.id === id)).toHaveLength(1);
    expect((await api("GET", `/sources/${id}`)).json.data.configured_props.greeting).toBe("Hey");

    const once = spawnSluiceBin(["dev", file.replace("source", "other"), "--delete-on-exit"], { env, cwd: work });
    write("dev/other.mjs", HELLO);
    await eventually(() => when(once.stderr().includes("Watching")), "the second dev", { timeoutMs: 30_000 });
    const otherId = sourceIdIn(once.stderr());
    expect(await stopWithCtrlC(once)).toEqual({ code: 0, signal: null });
    expect(once.stderr()).toContain(`Deleted source ${otherId}`);
    expect((await api("GET", `/sources/${otherId}`)).status).toBe(404);
  });

  it("dev on an action: runs it at once and after every save with the event and its props, prints each run, and deletes the session's workflow on Ctrl-C", async () => {
    const GREET = `export default {
  key: "cli-dev-greet",
  name: "Greet",
  version: "0.0.1",
  type: "action",
  props: { greeting: { type: "string", default: "Hello" } },
  async run({ steps, $ }) {
    const name = steps.trigger.event.body?.name;
    if (name === "nobody") throw new TypeError("no one to greet");
    console.log("greeting", name);
    $.export("$summary", "Greeted " + name);
    $.export("letters", name.length);
    return this.greeting + ", " + name;
  },
};
`;
    const file = write("dev/greet.mjs", GREET);
    const dev = spawnSluiceBin(["dev", file, "--prop", "greeting=Hey", "--event", '{"name":"Ada"}'], {
      env,
      cwd: work,
      timeoutMs: 90_000,
    });
    await eventually(() => when(dev.stdout().includes('return  "Hey, Ada"')), "the first run", { timeoutMs: 30_000 });
    const workflowId = /\b(p_[A-Za-z0-9_-]+)/.exec(dev.stderr())?.[1] ?? "";
    expect(dev.stderr()).toContain(`it runs as step "action" of workflow ${workflowId}, once now and after every save`);
    expect(dev.stdout()).toMatch(
      /run run_\S+ {2}success in \d+ ms\n\S+ {2}log {4}\[action\] greeting Ada\n {2}return {2}"Hey, Ada"\n {2}export {2}letters = 3\n {2}summary Greeted Ada\n/,
    );

    write(file, GREET.replace('", " + name', '", dear " + name'));
    await eventually(() => when(dev.stdout().includes('return  "Hey, dear Ada"')), "the run after the save", {
      timeoutMs: 30_000,
    });
    expect(dev.stderr()).toContain(`Redeployed greet.mjs to ${workflowId}`);
    // A run that throws prints its error.
    write(file, GREET.replace("body?.name;", 'body?.name && "nobody";'));
    await eventually(
      () => when(dev.stdout().includes("ERROR  TypeError: no one to greet (in action)")),
      "the failed run",
      {
        timeoutMs: 30_000,
      },
    );
    // A save that does not load: the error, and the step keeps its last code.
    write(file, "export default { props: { ,");
    await eventually(() => when(dev.stderr().includes("the action keeps its last code")), "the refused save", {
      timeoutMs: 30_000,
    });

    expect(await stopWithCtrlC(dev)).toEqual({ code: 0, signal: null });
    expect(dev.stderr()).toContain(`Deleted the session's workflow ${workflowId}; the action stays saved as sc_`);
    expect((await api("GET", `/workflows/${workflowId}`)).status).toBe(404);
    const bad = await runSluiceBin(["dev", file, "--event", "{not json"], { env, cwd: work });
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringContaining("dev: --event must be JSON") });
  });
});

describe("sluice deploy of a multi-file component, against a recording stand-in for the API", () => {
  interface Recorded {
    method: string;
    url: string;
    authorization: string | undefined;
    body: any;
  }
  const recorded: Recorded[] = [];
  let server: Server;
  let url: string;
  const read = (request: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let text = "";
      request.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      request.on("end", () => resolve(text));
    });

  beforeAll(async () => {
    server = createServer(async (request, response) => {
      const text = await read(request);
      recorded.push({
        method: request.method ?? "",
        url: request.url ?? "",
        authorization: request.headers.authorization,
        body: text ? JSON.parse(text) : undefined,
      });
      const answer =
        request.url === "/v1/components"
          ? {
              id: "sc_standin",
              name: "New Item",
              version: "0.0.1",
              configurable_props: [
                { name: "acme", type: "app" },
                { name: "limit", type: "integer" },
                { name: "label", type: "string" },
              ],
            }
          : { id: "dc_standin", name: "new-item", configured_props: {} };
      if (request.url?.endsWith("/sse")) {
        // No live stream here: dev says so and goes on watching.
        response.writeHead(404, { "content-type": "application/json" }).end('{"error":"no stream in the stand-in"}');
        return;
      }
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: answer }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  /** A checkout of a registry-shaped tree, with a secret beside it. */
  function registryTree(): string {
    const root = mkdtempSync(join(tmpdir(), "sluice-cli-registry-"));
    const files: Record<string, string> = {
      "secret.txt": "not for the server",
      "components/acme/package.json": '{"name":"@pipedream/acme"}',
      "components/acme/acme.app.mjs": 'export default { type: "app", app: "acme", propDefinitions: {} };\n',
      "components/acme/common/base.mjs": 'import acme from "../acme.app.mjs";\nexport default { props: { acme } };\n',
      "components/acme/sources/new-item/new-item.mjs":
        'import common from "../../common/base.mjs";\nexport default { ...common, key: "acme-new-item", name: "New Item", version: "0.0.1", type: "source", async run() {} };\n',
    };
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  }

  it("sends the entry and the files it imports as component_files, named from the app's folder", async () => {
    const tree = registryTree();
    const run = await runSluiceBin(
      ["deploy", "sources/new-item/new-item.mjs", "--prop", "limit=5", "--prop", "label=10"],
      { cwd: join(tree, "components/acme"), env: { SLUICE_URL: url, SLUICE_API_KEY: "standin-key-0123456789" } },
    );
    expect(run).toMatchObject({ code: 0, stdout: 'Deployed source "new-item" as dc_standin\n' });
    expect(run.stderr).toContain("deploying new-item.mjs (3 files)…");
    const [component, source] = recorded;
    expect(component).toEqual({
      method: "POST",
      url: "/v1/components",
      authorization: "Bearer standin-key-0123456789",
      body: {
        component_entry: "sources/new-item/new-item.mjs",
        component_files: {
          "sources/new-item/new-item.mjs": readFileSync(
            join(tree, "components/acme/sources/new-item/new-item.mjs"),
            "utf8",
          ),
          "common/base.mjs": readFileSync(join(tree, "components/acme/common/base.mjs"), "utf8"),
          "acme.app.mjs": readFileSync(join(tree, "components/acme/acme.app.mjs"), "utf8"),
        },
      },
    });
    expect(source).toMatchObject({
      method: "POST",
      url: "/v1/sources",
      body: { component_id: "sc_standin", configured_props: { limit: 5, label: "10" } },
    });
  });

  it("dev redeploys when a file the entry imports is saved, sending every file again to the same source", async () => {
    const tree = registryTree();
    const app = join(tree, "components/acme");
    const standin = { SLUICE_URL: url, SLUICE_API_KEY: "standin-key-0123456789" };
    const dev = spawnSluiceBin(["dev", "sources/new-item/new-item.mjs"], { cwd: app, env: standin });
    await eventually(() => when(dev.stderr().includes("Watching 3 file(s)")), "dev to watch the three files", {
      timeoutMs: 30_000,
    });
    const changed = 'import acme from "../acme.app.mjs";\nexport default { props: { acme }, changed: true };\n';
    writeFileSync(join(app, "common/base.mjs"), changed);
    await eventually(() => when(dev.stderr().includes("Redeployed new-item.mjs to dc_standin")), "the redeploy", {
      timeoutMs: 30_000,
    });
    expect(await stopWithCtrlC(dev)).toEqual({ code: 0, signal: null });
    const puts = recorded.filter((request) => request.method === "PUT");
    expect(puts).toHaveLength(1);
    expect(puts[0]).toMatchObject({
      url: "/v1/sources/dc_standin",
      body: {
        component_entry: "sources/new-item/new-item.mjs",
        component_files: { "common/base.mjs": changed, "acme.app.mjs": expect.any(String) },
      },
    });
    // Code alone: the server keeps the source's configured props.
    expect(puts[0]?.body).not.toHaveProperty("configured_props");
    expect(dev.stderr()).toContain("following events: no stream in the stand-in (404)");
  });

  it("refuses, before sending anything, an import that leaves the tree or a link out of it", async () => {
    const tree = registryTree();
    const app = join(tree, "components/acme");
    writeFileSync(join(app, "leak.mjs"), 'import secret from "../../secret.txt";\nexport default {};\n');
    symlinkSync(join(tree, "secret.txt"), join(app, "common/linked.mjs"));
    writeFileSync(join(app, "linky.mjs"), 'import s from "./common/linked.mjs";\nexport default {};\n');
    const before = recorded.length;
    const standin = { SLUICE_URL: url, SLUICE_API_KEY: "standin-key-0123456789" };
    const leak = await runSluiceBin(["deploy", "leak.mjs"], { cwd: app, env: standin });
    expect(leak.code).toBe(1);
    expect(leak.stderr).toContain("sluice: leak.mjs imports ../../secret.txt: outside");
    const link = await runSluiceBin(["deploy", "linky.mjs"], { cwd: app, env: standin });
    expect(link.code).toBe(1);
    expect(link.stderr).toMatch(/linky\.mjs imports \.\/common\/linked\.mjs: a link to .*secret\.txt, outside/);
    expect(recorded.length).toBe(before);
  });
});
