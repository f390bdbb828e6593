import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { DEFAULT_REGISTRY_DIR, registryFiles } from "#adapters/registry-files";
import { sealCredentials } from "#core/account-credentials";
import { MASK } from "#core/app-accounts";
import type { TimerSpec } from "#core/component-model";
import { createComponent } from "#core/components";
import { configureComponentProp } from "#core/dynamic-props";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { RunJob, SourceRunJob } from "#core/ports/run-queue";
import { timerTargetId } from "#core/ports/timers";
import { runQueuedJob } from "#core/run-jobs";
import { receiveHttpRequest } from "#core/source-endpoint";
import { listSourceEvents } from "#core/source-events";
import { fireTimer, runSource } from "#core/source-runs";
import {
  deleteSource,
  deploySource,
  getSource,
  listUserSources,
  listWorkspaceSources,
  updateSource,
} from "#core/sources";
import { createWorkflow } from "#core/workflows";
import { eventually } from "../support/eventually.ts";
import { accountIn, memoryDeps } from "../support/memory-deps.ts";
import { folderFiles } from "../support/registry-tree.ts";
import { rejection } from "../support/rejection.ts";
import { startStandInApi } from "../support/stand-in-api.ts";

/**
 * Components written the way the public registry writes them (test/fixtures/components/), run
 * through the real use cases and the real sandbox host, without the HTTP server in between.
 */
const fixture = (name: string) => readFileSync(new URL(`../fixtures/components/${name}`, import.meta.url), "utf8");

function request(body: unknown, method = "POST"): IncomingHttpRequest {
  const text = body === undefined ? "" : JSON.stringify(body);
  return {
    method,
    path: "/",
    rawQuery: "a=1",
    headers: { "content-type": "application/json", secret: "letmein" },
    body: Buffer.from(text),
    clientIp: "127.0.0.1",
    url: "http://127.0.0.1/http/x?a=1",
  };
}

describe("registry-style components through the use cases and the sandbox", () => {
  const workDir = mkdtempSync(join(tmpdir(), "sluice-compat-"));
  const host = new ProcessPoolHost({
    workDir,
    idleMs: 30_000,
    esbuildPlugins: [npmPackagesPlugin({ cacheDir: join(workDir, "packages") })],
  });
  const scheduled = new Map<string, TimerSpec>();
  const jobs: RunJob[] = [];
  const deps = memoryDeps(Date.now(), {
    host,
    timers: {
      schedule: async (target, spec) => void scheduled.set(timerTargetId(target), spec),
      cancel: async (target) => void scheduled.delete(timerTargetId(target)),
    },
    runs: { enqueue: async (job) => void jobs.push(job) },
    registry: registryFiles(DEFAULT_REGISTRY_DIR),
    fetcher: { fetchCode: async () => "" },
  });
  let caller: { userId: string };
  let workspaceId: string;

  beforeAll(async () => {
    const account = await accountIn(deps, "compat");
    caller = { userId: account.user.id };
    workspaceId = account.workspace.id;
  });
  afterAll(async () => {
    await host.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const events = async (sourceId: string, eventName = "") =>
    (await listSourceEvents(deps, caller, sourceId, { event_name: eventName, expand: "event" })).data;

  /** The newest event once there is one: a custom response is sent before its run's emits are stored. */
  const eventuallyOne = (sourceId: string) =>
    eventually(async () => (await events(sourceId))[0], `an event of ${sourceId}`);

  it("runs a polling source that imports @pipedream/platform, keeps a db cursor and dedupes", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("polling-db-dedupe.mjs") });
    expect(source.configured_props.timer).toEqual({ cron: null, interval_seconds: 900 });
    expect(scheduled.get(source.id)).toEqual({ intervalSeconds: 900 });
    // The deploy hook emitted the first three values.
    expect((await events(source.id)).map((e) => e.event)).toEqual([{ value: 3 }, { value: 2 }, { value: 1 }]);

    await fireTimer(deps, source.id, Date.now());
    const values = (await events(source.id)).map((e) => (e.event as { value: number }).value);
    // Run one re-emitted value 3 (dropped by `unique`) and found 4, 5, 6.
    expect(values).toEqual([6, 5, 4, 3, 2, 1]);
    const logs = await events(source.id, "$logs");
    expect(logs).toEqual([]);
  });

  it("runs a source built from spread objects: hooks, static options as choices and unique dedupe", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("common-spread-source.mjs") });
    expect(source.configured_props.status).toBe("open");
    const endpointKey = String(
      source.configured_props.http && (source.configured_props.http as { endpoint_url: string }).endpoint_url,
    )
      .split("/")
      .at(-1) as string;
    const answer = await receiveHttpRequest(
      deps,
      endpointKey,
      request({ id: 7, status: "open", createdAt: "2026-01-01T00:00:00Z" }),
    );
    expect(answer.status).toBe(200);
    const job = jobs.at(-1) as SourceRunJob;
    await runSource(deps, job);
    await runSource(deps, job); // delivered twice: `unique` keeps one
    await runSource(deps, { ...job, event: { ...(job.event as object), body: { id: 8, status: "closed" } } });
    const emitted = await events(source.id);
    expect(emitted.map((e) => e.metadata.id)).toEqual([7]);
    expect(emitted[0]?.metadata.summary).toBe("New item 7");

    // Static options are choices, not a bound (decision 538): a string outside them is taken, a number is not.
    await expect(updateSource(deps, caller, source.id, { configured_props: { status: 5 } })).rejects.toMatchObject({
      code: "validation",
      issues: [{ field: "configured_props.status" }],
    });
    const pending = await updateSource(deps, caller, source.id, { configured_props: { status: "pending" } });
    expect(pending.configured_props.status).toBe("pending");
    await deleteSource(deps, caller, source.id);
    expect(await deps.sources.getSource(source.id)).toBeUndefined();
  });

  it("runs a TypeScript source whose custom response is its own", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("typescript-define-source.ts") });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    const answer = await receiveHttpRequest(deps, key, request(undefined, "GET"));
    expect(answer.status).toBe(202);
    expect(JSON.parse(answer.body)).toEqual({ accepted: true });
  });

  it("answers at once for a legacy CommonJS source with bare-string props, whatever run responds", async () => {
    const source = await deploySource(deps, caller, {
      component_code: fixture("legacy-http-commonjs.js"),
      configured_props: { secret: "letmein" },
    });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    const answer = await receiveHttpRequest(deps, key, request({ hello: 1 }));
    expect(answer.status).toBe(200);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    const [emitted] = await events(source.id);
    expect(emitted?.event).toMatchObject({ method: "POST", body: { hello: 1 }, query: { a: "1" } });
    expect(emitted?.metadata.summary).toBe("request 1");
  });

  it("reads a legacy timer that sets intervalSeconds on the prop itself", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("legacy-timer-interval.js") });
    expect(source.configured_props.timer).toEqual({ cron: null, interval_seconds: 60 });
    const changed = await updateSource(deps, caller, source.id, {
      configured_props: { timer: { cron: "*/5 * * * *", timezone: "Europe/Berlin" } },
    });
    expect(changed.configured_props.timer).toMatchObject({ cron: "*/5 * * * *", interval_seconds: null });
    expect(scheduled.get(source.id)).toMatchObject({ cron: "*/5 * * * *", timezone: "Europe/Berlin" });
  });

  it("deploys the registry's HTTP source by key and answers with its configured response", async () => {
    const source = await deploySource(deps, caller, {
      key: "http-new-requests",
      configured_props: { responseStatus: "202", responseBody: "thanks" },
    });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    const answer = await receiveHttpRequest(deps, key, request({ ping: true }));
    expect(answer.status).toBe(202);
    expect(answer.body).toBe("thanks");
    // The answer came from `respond`; the run's emit is applied right after it.
    const deadline = Date.now() + 5_000;
    let emitted = (await events(source.id))[0];
    while (!emitted && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      emitted = (await events(source.id))[0];
    }
    expect(JSON.stringify(emitted?.event)).toContain("ping");
  });

  it("answers with the public registry's resStatusCode, resContentType and resBody on the shipped http-new-requests", async () => {
    const defaults = await deploySource(deps, caller, { key: "http-new-requests" });
    const keyOf = (source: typeof defaults) =>
      (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    const plain = await receiveHttpRequest(deps, keyOf(defaults), request({ ping: 1 }));
    expect(plain.status).toBe(200);
    expect(plain.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(plain.body)).toEqual({ success: true });

    const custom = await deploySource(deps, caller, {
      key: "http-new-requests",
      configured_props: { resStatusCode: "201", resContentType: "text/plain", resBody: "created", emitBodyOnly: true },
    });
    const answer = await receiveHttpRequest(deps, keyOf(custom), request({ ping: 2 }));
    expect(answer.status).toBe(201);
    expect(answer.headers["content-type"]).toBe("text/plain");
    expect(answer.body).toBe("created");
    const emitted = await eventuallyOne(custom.id);
    expect(emitted.event).toEqual({ ping: 2 });
    expect(emitted.metadata.summary).toBe("POST /");
  });

  it("runs the public registry's http-new-requests shape: httpInterface, res* props and the http app's methods", async () => {
    const source = await deploySource(deps, caller, {
      component_code: fixture("http-new-requests-public.mjs"),
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the http app interpolates this text itself
      configured_props: { resStatusCode: "202", summary: "got ${body.kind}" },
    });
    const key = (source.configured_props.httpInterface as { endpoint_url: string }).endpoint_url
      .split("/")
      .at(-1) as string;
    const answer = await receiveHttpRequest(deps, key, request({ kind: "order" }));
    expect(answer.status).toBe(202);
    expect(answer.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(answer.body)).toEqual({ success: true });
    const emitted = await eventuallyOne(source.id);
    expect(emitted.metadata.summary).toBe("got order");
    expect(emitted.event).toMatchObject({ method: "POST", body: { kind: "order" } });
  });

  it("refuses at deploy a source whose app needs a connected account, and an authProvisionId of no account", async () => {
    const needs = await rejection(
      deploySource(deps, caller, {
        component_code: fixture("github-app-polling.mjs"),
        configured_props: { repo: "a/b" },
      }),
    );
    expect(needs).toMatchObject({ code: "validation", issues: [{ field: "configured_props.github" }] });
    expect(needs.message).toBe(
      'configured_props.github: needs a connected account of the "github" app (its code reads $auth.login, $auth.oauth_access_token): connect one with POST /v1/accounts and configure the prop as {"authProvisionId": "apn_..."}',
    );
    const named = await rejection(
      deploySource(deps, caller, {
        component_code: fixture("rss-app-no-account.mjs"),
        configured_props: { rss: { authProvisionId: "apn_abc" }, urls: ["https://example.test/feed"] },
      }),
    );
    expect(named.issues).toEqual([
      {
        field: "configured_props.rss",
        message: "names apn_abc, which is no connected account of this workspace",
      },
    ]);
  });

  it("binds an app without an account with its methods and an empty $auth in hooks, methods and run", async () => {
    const source = await deploySource(deps, caller, {
      component_code: fixture("rss-app-no-account.mjs"),
      configured_props: { urls: [" HTTPS://Example.test/Feed "] },
    });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    await receiveHttpRequest(deps, key, request({ guid: "g1", title: "First" }));
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    const [emitted] = await events(source.id);
    expect(emitted?.event).toEqual({ guid: "g1", title: "First", feeds: ["https://example.test/feed"], auth: {} });
    expect(emitted?.metadata).toMatchObject({ id: "g1", summary: "First" });
  });

  it("emits each tick as it is for a schedule source without run", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("schedule-daily-no-run.mjs") });
    expect(source.configured_props.cron).toEqual({ cron: "0 11 * * *", interval_seconds: null });
    const at = Date.UTC(2026, 0, 2, 11, 0, 0);
    await fireTimer(deps, source.id, at);
    const [tick] = await events(source.id);
    expect(tick?.event).toMatchObject({ timestamp: at / 1000, cron: "0 11 * * *" });
    expect(await events(source.id, "$errors")).toEqual([]);
  });

  it("emits each request as it is for an HTTP source without run", async () => {
    const source = await deploySource(deps, caller, {
      component_code: 'export default { name: "Catch all", version: "0.0.1", props: { http: "$.interface.http" } };',
    });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    expect((await receiveHttpRequest(deps, key, request({ hello: "world" }))).status).toBe(200);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    const [emitted] = await events(source.id);
    expect(emitted?.event).toMatchObject({ method: "POST", body: { hello: "world" }, query: { a: "1" } });
  });

  it("answers not found to another account for every operation on a source, and lists only its own", async () => {
    const source = await deploySource(deps, caller, { component_code: fixture("typescript-define-source.ts") });
    const other = await accountIn(deps, "mallory");
    const stranger = { userId: other.user.id };
    const notFound = { code: "not_found" };
    await expect(getSource(deps, stranger, source.id)).rejects.toMatchObject(notFound);
    await expect(updateSource(deps, stranger, source.id, { active: false })).rejects.toMatchObject(notFound);
    await expect(deleteSource(deps, stranger, source.id)).rejects.toMatchObject(notFound);
    await expect(listSourceEvents(deps, stranger, source.id, {})).rejects.toMatchObject(notFound);
    const workspace = (await deps.identity.listWorkspacesOfUser(caller.userId))[0]?.id as string;
    await expect(listWorkspaceSources(deps, stranger, workspace, { limit: 10 })).rejects.toMatchObject(notFound);
    await expect(deploySource(deps, stranger, { component_id: source.component_id })).rejects.toMatchObject({
      code: "validation",
      issues: [{ field: "component_id" }],
    });
    expect((await listUserSources(deps, stranger, { limit: 10 })).data).toEqual([]);
    expect((await getSource(deps, caller, source.id)).active).toBe(true);
  });

  it("hands a connected account's key as $auth to a registry-shaped source's hook, runs and options, and to a workflow step", async () => {
    const api = await startStandInApi();
    const KEY = "tk_live_9d8c7b6a5f4e3d2c1b0a";
    api.tenant("acct").apiKey = KEY;
    api.addTasks("acct", "Existing");
    const runtime = deps.runtime;
    // The stand-in listens on 127.0.0.1, which a run may reach only when told.
    deps.runtime = { ...runtime, allowPrivateAddresses: true };
    try {
      const now = deps.clock.nowMs();
      const account = {
        id: "apn_01jd000000000000000000keys",
        workspaceId,
        ownerId: caller.userId,
        app: "keyed_tasks",
        name: "tasks key",
        sealedCredentials: await sealCredentials(deps, { api_url: api.baseUrl("acct"), api_key: KEY }),
        healthy: true,
        createdAt: now,
        updatedAt: now,
        version: 1,
      };
      await deps.appAccounts.create(account);
      const files = folderFiles(
        fileURLToPath(new URL("../fixtures/components/accounts/keyed_tasks/", import.meta.url)),
      );
      const source = await deploySource(deps, caller, {
        component_files: files,
        component_entry: "sources/new-task/new-task.mjs",
        configured_props: { keyedTasks: { authProvisionId: account.id } },
      });
      expect(source.configured_props.keyedTasks).toEqual({ authProvisionId: account.id });
      // The deploy hook listed the existing task with the key; a run then finds the new one.
      api.addTasks("acct", "Written after deploy");
      await fireTimer(deps, source.id, Date.now());
      expect((await events(source.id)).map((event) => event.metadata.summary)).toEqual([
        "New task: Written after deploy",
      ]);
      expect(api.requests.filter((line) => line.startsWith("GET /t/acct/tasks"))).toHaveLength(2);

      // The key is revoked at the app and a wrong one stored: the run fails with a 401.
      const wrong = "tk_live_wrong_0000000000000";
      const rotated = {
        ...account,
        sealedCredentials: await sealCredentials(deps, { api_url: api.baseUrl("acct"), api_key: wrong }),
        version: 2,
      };
      expect(await deps.appAccounts.update(rotated, 1)).toBe(true);
      await fireTimer(deps, source.id, Date.now());
      const [failure] = await events(source.id, "$errors");
      expect(JSON.stringify(failure)).toContain("401");
      const logs = await events(source.id, "$logs");
      expect(logs.map((log) => (log.event as { message: string }).message)).toContain(
        `polling with {"Authorization":"Bearer ${MASK}","Accept":"application/json"}`,
      );
      const seen = JSON.stringify([
        await events(source.id),
        logs,
        await events(source.id, "$errors"),
        await getSource(deps, caller, source.id),
      ]);
      expect(seen).not.toContain(KEY);
      expect(seen).not.toContain(wrong);
      expect(
        await deps.appAccounts.update({ ...rotated, sealedCredentials: account.sealedCredentials, version: 3 }, 2),
      ).toBe(true);

      // The action's propDefinition options list the account's tasks through the app's methods.
      const action = await createComponent(deps, caller, {
        component_files: files,
        component_entry: "actions/create-task/create-task.mjs",
      });
      const options = await configureComponentProp(deps, caller, {
        id: action.id,
        prop_name: "after",
        configured_props: { keyedTasks: { authProvisionId: account.id } },
      });
      expect(options).toMatchObject({
        errors: [],
        options: [
          { label: "Written after deploy", value: 2 },
          { label: "Existing", value: 1 },
        ],
      });

      // A workflow step: the registry-shaped action creates a task with the same account.
      const workflow = await createWorkflow(deps, caller, {
        steps: [
          {
            namespace: "create",
            component_files: files,
            component_entry: "actions/create-task/create-task.mjs",
            props: { keyedTasks: { authProvisionId: account.id }, title: "From a step" },
          },
        ],
        triggers: [{ type: "http" }],
        settings: { auto_deploy: true },
      });
      const key = (workflow.triggers[0] as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
      await receiveHttpRequest(deps, key, request({}));
      await runQueuedJob(deps, jobs.at(-1) as RunJob);
      const [run] = (await deps.workflowRuns.listRuns(workflow.id, { limit: 1 })).items;
      expect(run).toMatchObject({ status: "success", steps: [{ summary: "Created task 3" }] });
      expect(api.tenant("acct").tasks.map((task) => task.title)).toEqual([
        "Existing",
        "Written after deploy",
        "From a step",
      ]);
    } finally {
      deps.runtime = runtime;
      await api.close();
    }
  });
});
