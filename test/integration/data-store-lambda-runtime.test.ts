/**
 * The AWS path of data store calls, run here: the Lambda runtime (`createSourceHandler`, in this
 * process) sends each call with its run's grant to `POST /v1/data_store_calls`, served by a real
 * local server through the same route pipeline the API Lambdas run, against its SQLite stores. The
 * grant is sealed as `LambdaComponentHost`'s caller seals it (`grantDataStores`), with the
 * server's own key.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSecrets } from "#adapters/local/local-secrets";
import { grantDataStores } from "#core/data-stores";
import { systemClock } from "#core/ports/clock";
import { createSourceHandler, createWorkflowHandler } from "#runtime/lambda-entry";
import type { Invocation, InvocationResult, Json, WorkflowInvocation } from "#runtime/protocol";
import { apiClient, deployHttpSource } from "../support/api-client.ts";
import { eventually, when } from "../support/eventually.ts";
import { type SluiceProcess, startSluice } from "../support/local-process.ts";

/** Runs the body's `op` on its store, emits the result or the error. */
const component = {
  props: { dataStore: { type: "data_store" } },
  async run(this: { dataStore: any; $emit(event: unknown): void }, event: { op: string; args: unknown[] }) {
    try {
      const result = await this.dataStore[event.op](...event.args);
      this.$emit({ result: result === undefined ? "undefined" : result });
    } catch (error) {
      this.$emit({ error: (error as Error).message });
    }
  },
};

const STARTER = `
export default {
  name: "Starter",
  version: "0.0.1",
  props: { http: "$.interface.http", dataStore: { type: "data_store" } },
  async run() { await this.dataStore.set("from-local", 1); },
};
`;

let sluice: SluiceProcess;
let api: ReturnType<typeof apiClient>;
let secrets: LocalSecrets;
let storeId: string;
const handler = createSourceHandler(async () => ({ default: component }));
let counter = 0;

async function runInLambdaRuntime(event: { op: string; args: unknown[] }, grant: Invocation["dataStoreGrant"]) {
  const invocation: Invocation = {
    invocationId: `inv_lambda_${++counter}`,
    kind: "run",
    sourceId: "dc_lambda",
    props: { dataStore: { id: storeId, name: "starter" } },
    propTypes: { dataStore: "data_store" },
    db: {},
    event: event as unknown as Json,
    timeoutMs: 10_000,
    ...(grant ? { dataStoreGrant: grant } : {}),
  };
  const result = (await handler(JSON.parse(JSON.stringify(invocation)))) as InvocationResult;
  expect(result.error).toBeUndefined();
  return result.emits[0]?.event;
}

beforeAll(async () => {
  sluice = await startSluice();
  api = apiClient(sluice.baseUrl, sluice.apiKeyFromFile());
  secrets = new LocalSecrets(Buffer.from(readFileSync(join(sluice.dataDir, "secret-key"), "utf8").trim(), "base64"));
  const source = await deployHttpSource(api, STARTER);
  expect((await fetch(source.endpoint, { method: "POST" })).status).toBe(200);
  const workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
  const stores = (await api("GET", `/workspaces/${workspaceId}/data_stores`)).json.data;
  storeId = stores.find((store: { name: string }) => store.name === `${source.id}/dataStore`).id;
  // The source's run is queued (no custom response): its record lands a moment later.
  await eventually(
    async () => when((await api("GET", `/data_stores/${storeId}/records`)).json.data.length === 1),
    "the local run's record",
  );
});

afterAll(async () => {
  await sluice?.stop();
});

const grantFor = (stores: string[], timeoutMs = 10_000, clock = systemClock) =>
  grantDataStores(
    { secrets, clock, runtime: { publicUrl: sluice.baseUrl.replace(/\/v1$/, "") } as never },
    `inv_lambda_${counter + 1}`,
    new Set(stores),
    timeoutMs,
  );

describe("data store calls from the Lambda runtime, with a grant", () => {
  it("reads and writes the granted store through POST /v1/data_store_calls", async () => {
    const grant = await grantFor([storeId]);
    expect(grant.url).toBe(`${sluice.baseUrl}/data_store_calls`);
    expect(await runInLambdaRuntime({ op: "get", args: ["from-local"] }, grant)).toEqual({ result: 1 });
    expect(await runInLambdaRuntime({ op: "set", args: ["from-lambda", { a: [1] }, { ttl: 600 }] }, grant)).toEqual({
      result: "undefined",
    });
    expect(await runInLambdaRuntime({ op: "entries", args: [] }, grant)).toEqual({
      result: [
        ["from-lambda", { a: [1] }],
        ["from-local", 1],
      ],
    });
    const records = (await api("GET", `/data_stores/${storeId}/records`)).json.data;
    expect(records.map((record: { key: string }) => record.key)).toEqual(["from-lambda", "from-local"]);
  });

  it("refuses a grant that was changed, is of another key, has expired, or does not name the store", async () => {
    const genuine = await grantFor([storeId]);
    const changed = { ...genuine, grant: `${genuine.grant.slice(0, -4)}AAAA` };
    expect(await runInLambdaRuntime({ op: "keys", args: [] }, changed)).toEqual({
      error: "the data store grant is not valid",
    });
    const otherKey = await grantDataStores(
      {
        secrets: new LocalSecrets(new Uint8Array(32).fill(7)),
        clock: systemClock,
        runtime: { publicUrl: "" } as never,
      },
      "inv_x",
      new Set([storeId]),
      10_000,
    );
    expect(await runInLambdaRuntime({ op: "clear", args: [] }, { ...genuine, grant: otherKey.grant })).toEqual({
      error: "the data store grant is not valid",
    });
    const past = { nowMs: () => Date.now() - 60_000 };
    expect(await runInLambdaRuntime({ op: "keys", args: [] }, await grantFor([storeId], 1_000, past))).toEqual({
      error: "the data store grant has expired: its run has ended",
    });
    expect(await runInLambdaRuntime({ op: "keys", args: [] }, await grantFor(["ds_other"]))).toEqual({
      error: `data store ${storeId} is not bound to this run`,
    });
    expect((await api("GET", `/data_stores/${storeId}/records`)).json.data).toHaveLength(2);
  });

  it("throws a clear error without a grant, and when the service cannot be reached", async () => {
    expect(await runInLambdaRuntime({ op: "keys", args: [] }, undefined)).toEqual({
      error: "data stores are not available on this platform yet",
    });
    const unreachable = { url: "http://127.0.0.1:9/v1/data_store_calls", grant: "x" };
    expect(await runInLambdaRuntime({ op: "keys", args: [] }, unreachable)).toEqual({
      error: expect.stringContaining("the data store service could not be reached"),
    });
  });
});

describe("$.files from the workflow Lambda runtime, with a grant of the project", () => {
  /** A step that writes a file, lists the store, reads the file back and answers its URL. */
  const FILES_STEP = {
    async run({ $ }: { $: any }) {
      const { Readable } = await import("node:stream");
      await $.files.open("lambda/a.txt").fromReadableStream(Readable.from(["from the Lambda runtime"]));
      const listed: string[] = [];
      for await (const entry of $.files.dir("lambda")) listed.push(entry.path);
      const file = $.files.open("lambda/a.txt");
      return { listed, text: await file.toEncodedString(), url: await file.toUrl() };
    },
  };
  const handler = createWorkflowHandler({ files_step: async () => ({ default: FILES_STEP }) });

  async function runFilesStep(grant: WorkflowInvocation["dataStoreGrant"]) {
    const invocation: WorkflowInvocation = {
      invocationId: `inv_files_${++counter}`,
      kind: "workflow",
      workflowId: "p_lambda",
      trigger: { event: {}, context: {} },
      context: { id: "run_1", workflow_id: "p_lambda", run: { runs: 1, retry_count: 0 } },
      steps: [{ id: "c_files", namespace: "files", module: "files_step", props: {}, propTypes: {}, db: {} }],
      respondable: false,
      timeoutMs: 10_000,
      limits: { maxEmits: 5, maxEmitBytes: 10_000, maxSends: 10, maxSendBytes: 100_000, maxExportBytes: 1 << 20 },
      standalone: true,
      ...(grant ? { dataStoreGrant: grant } : {}),
    };
    return handler(JSON.parse(JSON.stringify(invocation)));
  }

  it("reaches the granted project's File Store through POST /v1/data_store_calls, and the content at its URLs", async () => {
    const workspaceId = (await api("GET", "/users/me")).json.data.orgs[0].id;
    const projectId = (await api("GET", `/workspaces/${workspaceId}/projects`)).json.data[0].id as string;
    const grant = await grantDataStores(
      { secrets, clock: systemClock, runtime: { publicUrl: sluice.baseUrl.replace(/\/v1$/, "") } as never },
      `inv_files_${counter + 1}`,
      new Set(),
      10_000,
      projectId,
    );
    const result = await runFilesStep(grant);
    expect(result.steps[0]?.error).toBeUndefined();
    const value = result.values?.files as { $return_value: { listed: string[]; text: string; url: string } };
    expect(value.$return_value).toMatchObject({ listed: ["lambda/a.txt"], text: "from the Lambda runtime" });
    expect(await (await fetch(value.$return_value.url)).text()).toBe("from the Lambda runtime");
    expect(readFileSync(join(sluice.dataDir, "file-stores", projectId, "lambda", "a.txt"), "utf8")).toBe(
      "from the Lambda runtime",
    );

    // Without a grant (code that did not name `files` on AWS), or with one of no project: a clear error.
    const none = await runFilesStep(undefined);
    expect(none.steps[0]?.error).toMatchObject({
      name: "FileStoreError",
      message: expect.stringContaining("no File Store"),
    });
    const noProject = await runFilesStep(await grantFor([]));
    expect(noProject.steps[0]?.error).toMatchObject({
      name: "FileStoreError",
      message: "$.files: this run has no File Store (workflow steps and actions run in a project have one)",
    });
  });
});
