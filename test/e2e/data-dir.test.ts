import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DATABASE_FILE } from "#local-mode/composition";
import { apiClient, createHttpWorkflow, deployHttpSource } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { newDataDir, REPO_ROOT, runSluice, type SluiceProcess, startSluice } from "../support/local-process.ts";
import { UID_EMITTER, WebhookReceiver } from "../support/webhook-receiver.ts";

const STEP = `export default defineComponent({
  async run({ steps, $ }) {
    await $.respond({ status: 200, body: { doubled: steps.trigger.event.body.n * 2 } });
  },
});
`;

const SOURCE = `export default {
  props: { http: "$.interface.http" },
  async run(event) {
    this.$emit(event.body);
  },
};
`;

const modeOf = (path: string) => statSync(path).mode & 0o777;

/** `sluice start` that is expected to end by itself: its exit code and everything it printed. */
async function startThatFails(env: Record<string, string>) {
  try {
    const { stdout, stderr } = await runSluice(["start"], { PORT: "0", ...env });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const { code, stdout, stderr } = error as { code: number; stdout: string; stderr: string };
    return { code, output: stdout + stderr };
  }
}

describe("the data dir", () => {
  const running: SluiceProcess[] = [];
  afterEach(async () => {
    for (const sluice of running.splice(0)) await sluice.stop("SIGKILL");
  });

  it("is made readable by its owner only, with the data files and key files too", async () => {
    const parent = newDataDir();
    const dataDir = join(parent, "nested", "data");
    running.push(await startSluice({ dataDir }));
    expect(modeOf(dataDir)).toBe(0o700);
    const files = readdirSync(dataDir).filter((name) => statSync(join(dataDir, name)).isFile());
    expect(files).toEqual(expect.arrayContaining([DATABASE_FILE, "api-key", "secret-key"]));
    expect(files.map((name) => [name, modeOf(join(dataDir, name)).toString(8)])).toEqual(
      files.map((name) => [name, "600"]),
    );
  });

  it("keeps the data files its owner's only when an older version left them readable by others", async () => {
    const dataDir = newDataDir();
    const first = await startSluice({ dataDir });
    await first.stop();
    for (const name of readdirSync(dataDir)) {
      const path = join(dataDir, name);
      if (statSync(path).isFile()) chmodSync(path, 0o644);
    }
    running.push(await startSluice({ dataDir }));
    for (const name of [DATABASE_FILE, "api-key", "secret-key"]) expect(modeOf(join(dataDir, name))).toBe(0o600);
  });
});

describe("a relative data dir (`npm start`'s default is ./.sluice)", () => {
  let sluice: SluiceProcess | undefined;
  afterAll(async () => {
    await sluice?.stop();
  });

  it("bundles sources and workflow steps from code, and the ready line names the dir", async () => {
    const dataDir = join(newDataDir(), "data");
    sluice = await startSluice({ dataDir: relative(REPO_ROOT, dataDir) });
    const api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
    // esbuild wrote a relative output path under the component's folder: both answered 500.
    const source = await deployHttpSource(api, SOURCE);
    expect(source.id).toMatch(/^dc_/);
    const workflow = await createHttpWorkflow(api, "relative", [{ namespace: "one", code: STEP }], true);
    const answer = await fetch(workflow.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ n: 20 }),
    });
    expect([answer.status, await answer.json()]).toEqual([200, { doubled: 40 }]);
    expect(sluice.output()).toContain(`data in ${dataDir})`);
  });
});

describe("a second server on the same data dir", () => {
  let receiver: WebhookReceiver;
  let first: SluiceProcess | undefined;
  let third: SluiceProcess | undefined;
  const dataDir = newDataDir();

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await first?.stop("SIGKILL");
    await third?.stop();
    await receiver.stop();
  });

  it("is refused with a message naming the data dir, and sends nothing; after a kill -9 a new one starts", async () => {
    // The delivery attempt in flight is claimed only in the first server's memory: a second server
    // that opened the data dir would claim it again and send it a second time.
    const settings = { SLUICE_WEBHOOK_TIMEOUT_MS: "60000" };
    first = await startSluice({ dataDir, env: settings });
    const api = apiClient(first.baseUrl, first.apiKeyFromFile());
    const source = await api("POST", "/sources", { component_code: UID_EMITTER });
    expect(source.status, JSON.stringify(source.json)).toBe(200);
    const hook = await api("POST", `/webhooks?url=${encodeURIComponent(receiver.url())}`);
    await api("POST", `/subscriptions?emitter_id=${source.json.data.id}&listener_id=${hook.json.data.id}`);
    receiver.hold = true;
    const endpoint = source.json.data.configured_props.http.endpoint_url as string;
    const posted = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ uid: "only-once" }),
    });
    expect(posted.status).toBe(200);
    await eventually(() => when(receiver.requests.length === 1), "the first delivery attempt");

    const second = await startThatFails({ SLUICE_DATA_DIR: dataDir, ...settings });
    expect(second.code).not.toBe(0);
    expect(second.output).toContain(`${resolve(dataDir)} is in use by another Sluice server`);
    expect(second.output).not.toContain("Sluice is ready");
    expect(receiver.requests).toHaveLength(1);
    // The first one goes on serving.
    expect((await api("GET", "/users/me")).status).toBe(200);

    expect((await first.stop("SIGKILL")).signal).toBe("SIGKILL");
    first = undefined;
    receiver.hold = false;
    third = await startSluice({ dataDir });
    // The attempt the killed server had in flight is made again, under the same delivery id.
    await eventually(() => when(receiver.delivered.length === 1), "the delivery, sent again by the new server");
    expect(receiver.delivered[0]?.headers["x-sluice-delivery-id"]).toBe(
      receiver.requests[0]?.headers["x-sluice-delivery-id"],
    );
  });

  it("does not keep create-user and create-key from working while a server runs", async () => {
    third ??= await startSluice({ dataDir });
    const { stdout } = await runSluice(["create-user", "--username", "bob", "--email", "bob@example.com"], {
      SLUICE_DATA_DIR: dataDir,
    });
    const bob = JSON.parse(stdout);
    const asBob = apiClient(third.baseUrl, bob.api_key);
    expect((await asBob("GET", "/users/me")).json.data.username).toBe("bob");
    const { stdout: keyOutput } = await runSluice(["create-key"], { SLUICE_DATA_DIR: dataDir });
    const key = keyOutput.split("\n")[0] ?? "";
    expect((await apiClient(third.baseUrl, key)("GET", "/users/me")).status).toBe(200);
  });
});

describe("a data dir that cannot be used", () => {
  it("stops the start with a message naming the path, before serving", async () => {
    const parent = newDataDir();
    const file = join(parent, "a-file");
    writeFileSync(file, "not a folder");
    const under = await startThatFails({ SLUICE_DATA_DIR: join(file, "data") });
    expect(under.code).not.toBe(0);
    expect(under.output).toContain(`cannot use the data dir ${join(file, "data")}`);
    expect(under.output).not.toContain("Sluice is ready");

    const isFile = await startThatFails({ SLUICE_DATA_DIR: file });
    expect(isFile.code).not.toBe(0);
    expect(isFile.output).toContain(`cannot use the data dir ${file}`);
  });

  it("names the data file when it cannot be opened", async () => {
    const dataDir = newDataDir();
    mkdirSync(join(dataDir, DATABASE_FILE));
    const result = await startThatFails({ SLUICE_DATA_DIR: dataDir });
    expect(result.code).not.toBe(0);
    expect(result.output).toContain(`cannot open the data file ${join(dataDir, DATABASE_FILE)}`);
  });
});
