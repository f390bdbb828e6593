import { describe, expect, it } from "vitest";
import { sealCredentials } from "#core/account-credentials";
import { ACCOUNT_ERROR, MASK } from "#core/app-accounts";
import type { ComponentDescription, PropDescription } from "#core/component-model";
import { createComponent } from "#core/components";
import { configureComponentProp, reloadComponentProps } from "#core/dynamic-props";
import type { IncomingHttpRequest } from "#core/http-run-event";
import type { AppAccountRecord } from "#core/ports/app-account-store";
import type { Deps } from "#core/ports/deps";
import { createLogger } from "#core/ports/logger";
import type { RunJob, SourceRunJob } from "#core/ports/run-queue";
import { runQueuedJob } from "#core/run-jobs";
import { receiveHttpRequest } from "#core/source-endpoint";
import { runSource } from "#core/source-runs";
import { deleteSource, deploySource, getSource, updateSource } from "#core/sources";
import { createWorkflow, getWorkflow } from "#core/workflows";
import type { Invocation, InvocationResult, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";

/**
 * Connected accounts in components (docs/components.md "Accounts in components"), on the trusted
 * side with a scripted host: the deploy-time check of `{authProvisionId}`, the `$auth` each use
 * receives, what happens when the account changes or goes, and that the credentials never reach
 * what is stored, logged or answered. The real sandbox reads `$auth` in test/e2e/accounts-in-components.test.ts.
 */
const API_KEY = "sk_live_4f9a8b7c6d5e4f3a2b1c";
const NEW_KEY = "sk_live_rotated_0123456789";

const GITHUB: PropDescription = { name: "github", type: "app", app: "github", authFields: ["api_key"] };
const HTTP: PropDescription = { name: "http", type: "$.interface.http" };

const POST: IncomingHttpRequest = {
  method: "POST",
  path: "/",
  rawQuery: "",
  headers: { "content-type": "application/json" },
  body: Buffer.from("{}"),
  clientIp: "127.0.0.1",
  url: "http://x/",
};

type Run = (invocation: Invocation) => Partial<InvocationResult>;
type StepRun = (invocation: WorkflowInvocation) => Partial<WorkflowResult>;

async function setUp(
  description: Partial<ComponentDescription> = { props: [GITHUB, HTTP], hooks: ["deploy", "activate", "deactivate"] },
  run: Run = () => ({}),
  stepRun: StepRun = () => ({}),
) {
  const { host, calls, workflowCalls } = scriptedHost(
    description,
    async (invocation) => run(invocation),
    async (invocation) => stepRun(invocation),
  );
  const jobs: RunJob[] = [];
  const logLines: string[] = [];
  const deps = memoryDeps(Date.now(), {
    host,
    runs: { enqueue: async (job) => void jobs.push(job) },
    timers: { schedule: async () => {}, cancel: async () => {} },
    registry: { readCode: async () => undefined, readTemplate: async () => undefined },
    fetcher: { fetchCode: async () => "" },
  });
  deps.log = createLogger({ level: "debug", write: (line) => logLines.push(line), now: () => 0 });
  const alice = await accountIn(deps, "alice");
  const bob = await accountIn(deps, "bob");
  const caller = { userId: alice.user.id };
  return { deps, calls, workflowCalls, jobs, logLines, alice, bob, caller };
}

let seq = 0;
/** An account straight in the store (the accounts routes are another part's). */
async function connect(
  deps: Deps,
  workspaceId: string,
  app = "github",
  credentials: Record<string, string | number> = { api_key: API_KEY },
): Promise<AppAccountRecord> {
  const now = deps.clock.nowMs();
  seq += 1;
  const record: AppAccountRecord = {
    id: `apn_${String(seq).padStart(3, "0")}${deps.ids.newSecret(8)}`,
    workspaceId,
    ownerId: "u_test",
    app,
    name: `${app} account`,
    sealedCredentials: await sealCredentials(deps, credentials),
    healthy: true,
    createdAt: now,
    updatedAt: now,
    version: 1,
  };
  await deps.appAccounts.create(record);
  return record;
}

const keyOf = (source: { configured_props: Record<string, unknown> }) =>
  String((source.configured_props.http as { endpoint_url: string }).endpoint_url)
    .split("/")
    .at(-1) as string;

const authOf = (invocation: Invocation | undefined, prop = "github") =>
  (invocation?.props[prop] as { $auth?: unknown } | undefined)?.$auth;

const stepAuth = (invocation: WorkflowInvocation | undefined) =>
  (invocation?.steps[0]?.props.github as { $auth?: unknown } | undefined)?.$auth;

describe("an app prop's account at deploy", () => {
  it("refuses an id of no account and one of another workspace with the same message, naming the prop", async () => {
    const { deps, caller, bob } = await setUp();
    const bobs = await connect(deps, bob.workspace.id);
    const missing = `apn_${"0".repeat(26)}`;
    const answers = await Promise.all(
      [missing, bobs.id].map((id) =>
        rejection(
          deploySource(deps, caller, { component_code: "x", configured_props: { github: { authProvisionId: id } } }),
        ),
      ),
    );
    for (const [i, id] of [missing, bobs.id].entries()) {
      expect(answers[i]?.issues).toEqual([
        { field: "configured_props.github", message: `names ${id}, which is no connected account of this workspace` },
      ]);
    }
    expect(await deps.sources.listSourcesOfUser(caller.userId, { limit: 10 })).toMatchObject({ items: [] });
  });

  it("refuses an account of another app, and an unset app whose code reads $auth, pointing to POST /v1/accounts", async () => {
    const { deps, caller, alice } = await setUp();
    const slack = await connect(deps, alice.workspace.id, "slack");
    const wrongApp = await rejection(
      deploySource(deps, caller, { component_code: "x", configured_props: { github: { authProvisionId: slack.id } } }),
    );
    expect(wrongApp.issues).toEqual([
      {
        field: "configured_props.github",
        message: `names the connected account ${slack.id} of the "slack" app; this prop needs an account of the "github" app`,
      },
    ]);
    const unset = await rejection(deploySource(deps, caller, { component_code: "x" }));
    expect(unset.message).toBe(
      'configured_props.github: needs a connected account of the "github" app (its code reads $auth.api_key): connect one with POST /v1/accounts and configure the prop as {"authProvisionId": "apn_..."}',
    );
  });

  it("refuses a workflow step's foreign account as steps[i].props.<name>", async () => {
    const { deps, caller, bob } = await setUp({ type: "action", props: [GITHUB] });
    const bobs = await connect(deps, bob.workspace.id);
    const refused = await rejection(
      createWorkflow(deps, caller, {
        steps: [{ namespace: "call", component_code: "x", props: { github: { authProvisionId: bobs.id } } }],
      }),
    );
    expect(refused.issues).toEqual([
      { field: "steps[0].props.github", message: `names ${bobs.id}, which is no connected account of this workspace` },
    ]);
  });

  it("refuses a foreign account on the dynamic props endpoints before any code runs", async () => {
    const { deps, caller, bob, calls } = await setUp({ props: [GITHUB], hasAdditionalProps: true });
    const bobs = await connect(deps, bob.workspace.id);
    const { id } = await createComponent(deps, caller, { component_code: "export default {}" });
    const before = calls.length;
    for (const ask of [
      () =>
        configureComponentProp(deps, caller, {
          id,
          prop_name: "github",
          configured_props: { github: { authProvisionId: bobs.id } },
        }),
      () => reloadComponentProps(deps, caller, { id, configured_props: { github: { authProvisionId: bobs.id } } }),
    ]) {
      const refused = await rejection(ask());
      expect(refused.issues).toEqual([
        {
          field: "configured_props.github",
          message: `names ${bobs.id}, which is no connected account of this workspace`,
        },
      ]);
    }
    expect(calls.length).toBe(before);
  });
});

describe("$auth in every use of a source", () => {
  it("gives hooks, runs, options and additionalProps the account's credentials, read anew each time", async () => {
    const { deps, caller, alice, calls, jobs } = await setUp({
      props: [GITHUB, HTTP],
      hooks: ["deploy", "activate", "deactivate"],
      hasAdditionalProps: true,
    });
    const account = await connect(deps, alice.workspace.id);
    const source = await deploySource(deps, caller, {
      component_code: "x",
      // A forged $auth in the request is dropped: only the id is kept.
      configured_props: { github: { authProvisionId: account.id, $auth: { api_key: "forged" } } },
    });
    expect(source.configured_props.github).toEqual({ authProvisionId: account.id });
    expect(calls.map((call) => [call.kind, authOf(call)])).toEqual([
      ["additionalProps", { api_key: API_KEY }],
      ["deploy", { api_key: API_KEY }],
      ["activate", { api_key: API_KEY }],
    ]);

    // The key rotated: the next run has the new one, with no redeploy.
    const rotated = { ...account, sealedCredentials: await sealCredentials(deps, { api_key: NEW_KEY }), version: 2 };
    expect(await deps.appAccounts.update(rotated, 1)).toBe(true);
    await receiveHttpRequest(deps, keyOf(source), POST);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    expect(calls.at(-1)?.kind).toBe("run");
    expect(authOf(calls.at(-1))).toEqual({ api_key: NEW_KEY });

    const { id } = await createComponent(deps, caller, { component_code: "export default {}" });
    await configureComponentProp(deps, caller, {
      id,
      prop_name: "repo",
      configured_props: { github: { authProvisionId: account.id } },
    });
    expect(calls.at(-1)?.kind).toBe("propOptions");
    expect(authOf(calls.at(-1))).toEqual({ api_key: NEW_KEY });
  });

  it("fails a run whose account was deleted with an AccountError naming the prop and the id, and still deletes the source", async () => {
    const { deps, caller, alice, calls, jobs } = await setUp();
    const account = await connect(deps, alice.workspace.id);
    const source = await deploySource(deps, caller, {
      component_code: "x",
      configured_props: { github: { authProvisionId: account.id } },
    });
    await deps.appAccounts.delete(account.id);
    const ran = calls.length;
    await receiveHttpRequest(deps, keyOf(source), POST);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    expect(calls.length).toBe(ran);
    const errors = (await deps.events.listEvents(source.id, { channel: "$errors", limit: 10 })).items;
    expect(errors.map((event) => (event.event as { error: { code: string; message: string } }).error)).toEqual([
      expect.objectContaining({
        code: ACCOUNT_ERROR,
        message: `the prop "github" names the connected account ${account.id}, which no longer exists in this workspace: connect an account of the "github" app and configure the prop with it`,
      }),
    ]);
    // Its deactivate hook could not reach the app anyway: skipped, and the source goes.
    await expect(deleteSource(deps, caller, source.id)).resolves.toEqual({ id: source.id, deleted: true });
    expect(calls.length).toBe(ran);
  });

  it("refuses to update a source onto an account that is gone", async () => {
    const { deps, caller, alice } = await setUp();
    const account = await connect(deps, alice.workspace.id);
    const source = await deploySource(deps, caller, {
      component_code: "x",
      configured_props: { github: { authProvisionId: account.id } },
    });
    await deps.appAccounts.delete(account.id);
    const refused = await rejection(updateSource(deps, caller, source.id, { configured_props: {} }));
    expect(refused.issues?.[0]?.field).toBe("configured_props.github");
  });

  it("reads no account for a component without one", async () => {
    const { deps, caller, jobs } = await setUp({ props: [HTTP, { ...GITHUB, app: "http", name: "web" }] });
    let reads = 0;
    const get = deps.appAccounts.get.bind(deps.appAccounts);
    deps.appAccounts.get = (id) => {
      reads += 1;
      return get(id);
    };
    const source = await deploySource(deps, caller, { component_code: "x" });
    await receiveHttpRequest(deps, keyOf(source), POST);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    expect(reads).toBe(0);
  });
});

describe("credentials never leak", () => {
  /** A component that logs its credentials and throws them, as a careless one would. */
  const leaky: Run = (invocation) => {
    const auth = authOf(invocation) as { api_key: string } | undefined;
    if (invocation.kind !== "run" || !auth) return {};
    return {
      logs: [
        { ts: 1, level: "info", message: `calling with ${auth.api_key}` },
        { ts: 1, level: "info", message: JSON.stringify({ headers: { Authorization: `Bearer ${auth.api_key}` } }) },
      ],
      error: {
        name: "AxiosError",
        message: `401 for key ${auth.api_key}`,
        stack: `AxiosError: 401 for key ${auth.api_key}\n    at component.mjs:3:9`,
        ts: 2,
      },
    };
  };

  /** Deploys a source whose github prop names `accountId`, runs it once, and reads its $logs and $errors. */
  async function runWith(deps: Deps, caller: { userId: string }, jobs: RunJob[], accountId: string) {
    const source = await deploySource(deps, caller, {
      component_code: "x",
      configured_props: { github: { authProvisionId: accountId } },
    });
    await receiveHttpRequest(deps, keyOf(source), POST);
    await runSource(deps, jobs.at(-1) as SourceRunJob);
    const stored = [
      ...(await deps.events.listEvents(source.id, { channel: "$logs", limit: 100 })).items,
      ...(await deps.events.listEvents(source.id, { channel: "$errors", limit: 100 })).items,
    ];
    return { source, stored };
  }

  it("masks them in a run's $logs and $errors, the server's log, and the source's view", async () => {
    const { deps, caller, alice, jobs, logLines } = await setUp({ props: [GITHUB, HTTP] }, leaky);
    const account = await connect(deps, alice.workspace.id);
    const { source, stored } = await runWith(deps, caller, jobs, account.id);
    expect(stored.map((event) => event.channel)).toEqual(["$logs", "$logs", "$errors"]);
    const everything = JSON.stringify([stored, logLines, await getSource(deps, caller, source.id)]);
    expect(everything).not.toContain(API_KEY);
    expect(JSON.stringify(stored)).toContain(`401 for key ${MASK}`);
    expect(logLines.some((line) => line.includes("source run failed") && line.includes(MASK))).toBe(true);
  });

  it("masks a key inside a longer one, a key in an error's name, and a long numeric credential", async () => {
    // Hostile shapes: the short key is a prefix of the long one (masked first, it would leave the
    // long one's tail in clear), an error whose name is the key, an account number given as a number.
    const SHORT = "sk_live_0123456789";
    const LONG = `${SHORT}-tail-that-is-secret-too`;
    const NUMBER = 98_765_432_101;
    const leak: Run = () => ({
      logs: [{ level: "info", message: `long ${LONG} number ${NUMBER}`, ts: 1 }],
      error: { name: `E${SHORT}`, message: "refused", ts: 2 },
    });
    const { deps, caller, alice, jobs, logLines } = await setUp({ props: [GITHUB, HTTP] }, leak);
    const account = await connect(deps, alice.workspace.id, "github", {
      api_key: SHORT,
      secret: LONG,
      account_number: NUMBER,
    });
    const { stored } = await runWith(deps, caller, jobs, account.id);
    const everything = JSON.stringify([stored, logLines]);
    expect(everything).toContain(`long ${MASK} number ${MASK}`);
    for (const leaked of [SHORT, "tail-that-is-secret", String(NUMBER)]) expect(everything).not.toContain(leaked);
  });

  it("masks them in the 400 of a deploy whose hook threw them", async () => {
    const hookLeak: Run = (invocation) =>
      invocation.kind === "activate"
        ? { error: { name: "Error", message: `bad key ${(authOf(invocation) as { api_key: string }).api_key}`, ts: 1 } }
        : {};
    const { deps, caller, alice, logLines } = await setUp({ props: [GITHUB], hooks: ["activate"] }, hookLeak);
    const account = await connect(deps, alice.workspace.id);
    const refused = await rejection(
      deploySource(deps, caller, {
        component_code: "x",
        configured_props: { github: { authProvisionId: account.id } },
      }),
    );
    expect(refused.message).toBe(`the activate hook failed: bad key ${MASK}`);
    expect(JSON.stringify(logLines)).not.toContain(API_KEY);
  });

  it("masks them in the observations and errors of the dynamic props endpoints", async () => {
    const probeLeak: Run = (invocation) => {
      const key = (authOf(invocation) as { api_key: string }).api_key;
      return {
        logs: [{ ts: 1, level: "log", message: `listing with ${key}` }],
        error: { name: "Error", message: `refused ${key}`, ts: 2 },
      };
    };
    const { deps, caller, alice } = await setUp({ props: [GITHUB] }, probeLeak);
    const account = await connect(deps, alice.workspace.id);
    const { id } = await createComponent(deps, caller, { component_code: "export default {}" });
    const answer = await configureComponentProp(deps, caller, {
      id,
      prop_name: "repo",
      configured_props: { github: { authProvisionId: account.id } },
    });
    expect(answer.observations).toEqual([
      { k: "console.log", msg: `listing with ${MASK}`, ts: 1 },
      { k: "error", err: { name: "Error", message: `refused ${MASK}` }, ts: 2 },
    ]);
    expect(JSON.stringify(answer)).not.toContain(API_KEY);
  });

  it("masks them in a workflow run's $errors, run record and logs, and the view shows the account id only", async () => {
    const stepRun: StepRun = (invocation) => {
      const step = invocation.steps[0];
      const key = (stepAuth(invocation) as { api_key: string }).api_key;
      return {
        steps: [
          {
            id: step?.id as string,
            status: "error",
            exportBytes: 0,
            dbWrites: {},
            durationMs: 1,
            summary: `used ${key}`,
            error: { name: "Error", message: `refused ${key}`, stack: `Error: refused ${key}`, ts: 1 },
          },
        ],
        logs: [{ ts: 1, level: "info", message: `key=${key}`, step: step?.id as string }],
      };
    };
    const { deps, caller, alice, jobs, workflowCalls, logLines } = await setUp(
      { type: "action", props: [GITHUB] },
      undefined,
      stepRun,
    );
    const account = await connect(deps, alice.workspace.id);
    const created = await createWorkflow(deps, caller, {
      steps: [{ namespace: "call", component_code: "x", props: { github: { authProvisionId: account.id } } }],
      triggers: [{ type: "http" }],
      settings: { auto_deploy: true },
    });
    const workflow = created;
    expect(workflow.steps[0]).toMatchObject({
      authProvisionIdMap: { github: account.id },
      authProvisionIds: [account.id],
      configured_props_json: JSON.stringify({ github: { authProvisionId: account.id } }),
    });
    const key = (workflow.triggers[0] as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    await receiveHttpRequest(deps, key, POST);
    await runQueuedJob(deps, jobs.at(-1) as RunJob);
    expect(stepAuth(workflowCalls.at(-1))).toEqual({ api_key: API_KEY });
    const stored = (await deps.events.listEvents(workflow.id, { channel: "$errors", limit: 100 })).items;
    const runs = (await deps.workflowRuns.listRuns(workflow.id, { limit: 10 })).items;
    expect(runs[0]?.error?.message).toBe(`refused ${MASK}`);
    const everything = JSON.stringify([stored, runs, logLines, await getWorkflow(deps, caller, workflow.id)]);
    expect(everything).not.toContain(API_KEY);
    expect(stored).toHaveLength(1);
  });

  it("fails a workflow run whose step's account was deleted, naming the step, the prop and the id", async () => {
    const { deps, caller, alice, jobs, workflowCalls } = await setUp({ type: "action", props: [GITHUB] }, undefined);
    const account = await connect(deps, alice.workspace.id);
    const created = await createWorkflow(deps, caller, {
      steps: [{ namespace: "call", component_code: "x", props: { github: { authProvisionId: account.id } } }],
      triggers: [{ type: "http" }],
      settings: { auto_deploy: true },
    });
    await deps.appAccounts.delete(account.id);
    const key = (created.triggers[0] as { endpoint_url: string }).endpoint_url.split("/").at(-1) as string;
    await receiveHttpRequest(deps, key, POST);
    await runQueuedJob(deps, jobs.at(-1) as RunJob);
    expect(workflowCalls).toHaveLength(0);
    const runs = (await deps.workflowRuns.listRuns(created.id, { limit: 10 })).items;
    expect(runs[0]).toMatchObject({ status: "error", error: { code: ACCOUNT_ERROR } });
    expect(runs[0]?.error?.message).toContain(
      `the step "call"'s prop "github" names the connected account ${account.id}`,
    );
  });
});
