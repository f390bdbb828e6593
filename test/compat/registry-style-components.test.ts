import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessPoolHost } from "#adapters/local/process-pool-host";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { DEFAULT_REGISTRY_DIR, registryFiles } from "#adapters/registry-files";
import type { TimerSpec } from "#core/component-model";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { SourceRunJob } from "#core/ports/run-queue";
import { timerTargetId } from "#core/ports/timers";
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
import { accountIn, memoryDeps } from "../support/memory-deps.ts";

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
  const jobs: SourceRunJob[] = [];
  const deps = memoryDeps(Date.now(), {
    host,
    timers: {
      schedule: async (target, spec) => void scheduled.set(timerTargetId(target), spec),
      cancel: async (target) => void scheduled.delete(timerTargetId(target)),
    },
    runs: { enqueue: async (job) => void jobs.push(job as SourceRunJob) },
    registry: registryFiles(DEFAULT_REGISTRY_DIR),
    fetcher: { fetchCode: async () => "" },
  });
  let caller: { userId: string };

  beforeAll(async () => {
    const account = await accountIn(deps, "compat");
    caller = { userId: account.user.id };
  });
  afterAll(async () => {
    await host.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const events = async (sourceId: string, eventName = "") =>
    (await listSourceEvents(deps, caller, sourceId, { event_name: eventName, expand: "event" })).data;

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

  it("runs a source built from spread objects: hooks, static options and unique dedupe", async () => {
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

    await expect(
      updateSource(deps, caller, source.id, { configured_props: { status: "pending" } }),
    ).rejects.toMatchObject({ code: "validation", issues: [{ field: "configured_props.status" }] });
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

  it("takes the public registry's props for the registry's HTTP source: resStatusCode, resContentType, resBody", async () => {
    const source = await deploySource(deps, caller, {
      key: "http-new-requests",
      configured_props: { resStatusCode: "201", resContentType: "text/plain", resBody: "made", emitBodyOnly: true },
    });
    const key = (source.configured_props.http as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    const answer = await receiveHttpRequest(deps, key, request({ ping: 2 }));
    expect(answer.status).toBe(201);
    expect(answer.body).toBe("made");
    expect(answer.headers["content-type"]).toBe("text/plain");
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
});
