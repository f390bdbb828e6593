import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import { listWorkflowDeadLetters, replayAllWorkflowDeadLetters, replayWorkflowDeadLetter } from "#core/dead-letters";
import { invalid } from "#core/errors";
import { toPageQuery } from "#core/pagination";
import type { ComponentHost, WorkflowCode } from "#core/ports/component-host";
import { deploySource, getSource } from "#core/sources";
import type { DeadLetterRecord, DeliveryRecord, DeliveryTarget } from "#core/subscription-model";
import { createSubscription } from "#core/subscriptions";
import { createWebhook } from "#core/webhooks";
import { listWorkflowEvents } from "#core/workflow-events";
import type { WorkflowRun } from "#core/workflow-model";
import { keepPause, newFlowBase } from "#core/workflow-pauses";
import { workflowCode } from "#core/workflow-runs";
import {
  createWorkflow,
  deleteWorkflow,
  getWorkflow,
  listUserWorkflows,
  listWorkspaceWorkflows,
  updateWorkflow,
} from "#core/workflows";
import { updateWorkflowBody } from "#http/workflow-schemas";
import type { Invocation, InvocationResult } from "#runtime/protocol";
import { accountIn, memoryDeps } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";
import { runningRun } from "../../support/workflow-record.ts";

/**
 * The workflow use cases on the real local stores, with a host that describes each code string as
 * the table below says (the sandbox itself is tested in test/e2e/workflows-api.test.ts).
 */
const BASE: ComponentDescription = {
  type: "source",
  hooks: [],
  methods: [],
  hasRun: true,
  hasAdditionalProps: false,
  props: [],
  name: "Step",
  version: "1.0.0",
};

const DESCRIPTIONS: Record<string, Partial<ComponentDescription>> = {
  // A plain code step: no type, so it describes as a source (decision 170).
  code: {},
  other: { name: "Other" },
  action: {
    type: "action",
    key: "send",
    props: [
      { name: "url", type: "string" },
      { name: "count", type: "integer", optional: true },
      { name: "token", type: "string", secret: true, optional: true },
    ],
  },
  hooks: { hooks: ["deploy", "activate"] },
  deactivating: { hooks: ["deactivate"] },
  dedupe: { dedupe: "unique" },
  timer: { props: [{ name: "timer", type: "$.interface.timer" }] },
  http: { props: [{ name: "http", type: "$.interface.http" }] },
  source: { name: "Feed" },
  // An action whose app methods read its $auth (an account is needed), and one of an app that needs none.
  githubAction: {
    type: "action",
    props: [{ name: "github", type: "app", app: "github", authFields: ["oauth_access_token"] }],
  },
  helpersAction: {
    type: "action",
    props: [{ name: "helper_functions", type: "app", app: "helper_functions", authFields: ["token"] }],
  },
  // An action whose additionalProps add props by its static `mode` (see `probes` in testHost).
  dynamic: { type: "action", hasAdditionalProps: true, props: [{ name: "mode", type: "string" }] },
};

/** What the `dynamic` action's additionalProps answers for each `mode`. */
const DYNAMIC_PROPS: Record<string, Partial<InvocationResult>> = {
  count: { additionalProps: [{ name: "value", type: "integer", min: 1 }] },
  none: { additionalProps: [] },
  fails: { error: { name: "Error", message: "no such mode", ts: 0 } },
  timer: { additionalProps: [{ name: "timer", type: "$.interface.timer" }] },
  airtable: { additionalProps: [{ name: "base", type: "$.airtable.baseId" }] },
  proto: { additionalProps: JSON.parse('[{"name": "__proto__", "type": "object", "optional": true}]') },
  slow: { additionalProps: [] },
};

/** Called when the `dynamic` action's additionalProps runs in `slow` mode: a test moves the clock there. */
const slowProbe: { onRun?: () => void } = {};

function testHost() {
  const prepared: WorkflowCode[] = [];
  const removed: string[] = [];
  /** The invocations of additionalProps (the probes of `dynamic` steps). */
  const probes: Invocation[] = [];
  const host: ComponentHost = {
    describe: async (code) => {
      if (code === "broken") throw invalid("component_code", "SyntaxError: Unexpected token (3:5)");
      const description = DESCRIPTIONS[code];
      if (!description) throw invalid("component_code", "unknown test code");
      return { ...BASE, ...description };
    },
    prepare: async () => {},
    remove: async () => {},
    invoke: async (_code, invocation) => {
      if (invocation.kind !== "additionalProps") throw new Error("no source runs in this test");
      probes.push(invocation);
      if (invocation.props.mode === "slow") slowProbe.onRun?.();
      const answer = DYNAMIC_PROPS[String(invocation.props.mode)] ?? {};
      return { invocationId: invocation.invocationId, emits: [], dbWrites: {}, logs: [], durationMs: 1, ...answer };
    },
    prepareWorkflow: async (code) => void prepared.push(code),
    invokeWorkflow: async () => {
      throw new Error("no workflow runs in this test");
    },
    removeWorkflow: async ({ workflowId }) => void removed.push(workflowId),
  };
  return { host, prepared, removed, probes };
}

/** Templates as the registry holds them: JSON text, by id. */
const TEMPLATES: Record<string, string> = {
  tch_test: JSON.stringify({
    id: "tch_test",
    name: "Test template",
    description: "Two steps, an HTTP and a timer trigger",
    steps: [
      { namespace: "parse", component_code: "code" },
      { namespace: "send", key: "http-send", props: { url: "https://example.com/t" } },
    ],
    triggers: [
      { type: "http", props: { custom_response: true } },
      { type: "timer", props: { intervalSeconds: 600 } },
    ],
    settings: { name: "From the template", auto_deploy: false },
  }),
  tch_unnamed: JSON.stringify({
    id: "tch_unnamed",
    name: "Unnamed settings",
    description: "No name in its settings",
    steps: [{ namespace: "only", component_code: "code" }],
    triggers: [],
    settings: {},
  }),
};

async function setUp() {
  const { host, prepared, removed, probes } = testHost();
  const deps = memoryDeps(Date.UTC(2026, 10, 26, 8), {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
    registry: {
      readCode: async (key) => (key === "http-send" ? "action" : undefined),
      readTemplate: async (id) => TEMPLATES[id],
    },
    fetcher: { fetchCode: async () => "" },
  });
  const ownerAccount = await accountIn(deps, "owner");
  const strangerAccount = await accountIn(deps, "stranger");
  return {
    deps,
    prepared,
    removed,
    probes,
    owner: { userId: ownerAccount.user.id },
    ownerAccount,
    stranger: { userId: strangerAccount.user.id },
    strangerAccount,
  };
}

const codeStep = (namespace = "parse") => ({ namespace, component_code: "code" });

/** A send of run `run_01jd...ab` of `workflowId` that failed its 8 attempts at `now` + 1 s. */
function sendDeadLetter(
  workflowId: string,
  userId: string,
  now: number,
  id: string,
  target: DeliveryTarget,
): DeadLetterRecord {
  return {
    id,
    target,
    subscriptionIds: [],
    emitterId: workflowId,
    eventId: "run_01jd0000000000000000ab",
    channel: "",
    payload: null,
    attempts: 8,
    nextAttemptAt: now,
    createdAt: now,
    userId,
    failedAt: now + 1_000,
    lastError: "HTTP 500",
  };
}

describe("createWorkflow", () => {
  it("saves each step as a component, stores HTTP and timer triggers, builds the deployment, answers the view", async () => {
    const { deps, owner, ownerAccount, prepared } = await setUp();
    const created = await createWorkflow(deps, owner, {
      settings: { name: "Orders" },
      steps: [
        codeStep(),
        { namespace: "send", key: "http-send", props: { url: "https://example.com", token: "s3cret" } },
        { namespace: "again", component_code: "code", disabled: true },
      ],
      triggers: [
        { type: "http", props: { custom_response: true } },
        { type: "timer", props: { cron: "0  9 * * 1", timezone: "Europe/Paris" } },
      ],
    });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^p_/),
      name: "Orders",
      active: false,
      org_id: ownerAccount.workspace.id,
      project_id: ownerAccount.project.id,
      external_id: null,
      deployment_id: expect.stringMatching(/^d_/),
      created_at: Date.UTC(2026, 10, 26, 8) / 1000,
    });
    expect(created.steps.map((step) => [step.namespace, step.type, step.disabled, step.code_raw])).toEqual([
      ["parse", "CodeCell", false, "code"],
      ["send", "ActionCell", false, null],
      ["again", "CodeCell", true, "code"],
    ]);
    const send = created.steps[1];
    expect(send).toMatchObject({
      id: expect.stringMatching(/^c_/),
      component_key: "http-send",
      component_owner_id: null,
    });
    // The secret is neither shown nor stored in clear.
    expect(JSON.parse(send?.configured_props_json ?? "")).toEqual({ url: "https://example.com" });
    const stored = await deps.workflows.getWorkflow(created.id);
    expect(JSON.stringify(stored)).not.toContain("s3cret");
    expect(created.steps[0]?.component_owner_id).toBe(owner.userId);
    const [http, timer] = created.triggers;
    expect(http).toMatchObject({ id: expect.stringMatching(/^hi_/), custom_response: true });
    expect((http as { endpoint_url: string }).endpoint_url).toBe(
      `http://127.0.0.1:4000/http/${(http as { key: string }).key}`,
    );
    expect(timer).toMatchObject({
      id: expect.stringMatching(/^ti_/),
      cron: "0 9 * * 1",
      timezone: "Europe/Paris",
      interval_seconds: 0,
    });
    // One module per distinct code, disabled steps included.
    expect(prepared).toHaveLength(1);
    expect(prepared[0]).toMatchObject({ workflowId: created.id, deploymentId: created.deployment_id });
    expect(prepared[0]?.steps.map((step) => step.code).sort()).toEqual(["action", "code"]);
  });

  it("names the default, is active only with auto_deploy, and takes a saved component by id", async () => {
    const { deps, owner } = await setUp();
    const first = await createWorkflow(deps, owner, { steps: [codeStep()] });
    expect(first).toMatchObject({ name: "Untitled workflow", active: false, triggers: [] });
    const componentId = (await deps.workflows.getWorkflow(first.id))?.steps[0]?.componentId;
    const second = await createWorkflow(deps, owner, {
      settings: { auto_deploy: true },
      steps: [{ namespace: "again", component_id: componentId }],
    });
    expect(second.active).toBe(true);
    expect(second.steps[0]).toMatchObject({ type: "ActionCell", savedComponent: { id: componentId } });
  });

  const refusals: [string, Record<string, unknown>, string][] = [
    ["no steps", { steps: [] }, "steps"],
    ["51 steps", { steps: Array.from({ length: 51 }, (_, i) => codeStep(`s${i}`)) }, "steps"],
    ["no code choice", { steps: [{ namespace: "a" }] }, "steps[0]"],
    ["two code choices", { steps: [{ namespace: "a", component_code: "code", key: "http-send" }] }, "steps[0]"],
    ["no namespace", { steps: [{ component_code: "code" }] }, "steps[0].namespace"],
    ["a namespace starting with a digit", { steps: [codeStep("1st")] }, "steps[0].namespace"],
    ["a namespace with a dash", { steps: [codeStep("a-b")] }, "steps[0].namespace"],
    ["the namespace trigger", { steps: [codeStep("trigger")] }, "steps[0].namespace"],
    ["a repeated namespace", { steps: [codeStep("a"), codeStep("a")] }, "steps[1].namespace"],
    [
      "code that does not load",
      { steps: [codeStep(), { namespace: "b", component_code: "broken" }] },
      "steps[1].component_code",
    ],
    ["a step with hooks", { steps: [{ namespace: "a", component_code: "hooks" }] }, "steps[0].component_code"],
    ["a step with dedupe", { steps: [{ namespace: "a", component_code: "dedupe" }] }, "steps[0].component_code"],
    ["a step with a timer prop", { steps: [{ namespace: "a", component_code: "timer" }] }, "steps[0].component_code"],
    ["a step with an http prop", { steps: [{ namespace: "a", component_code: "http" }] }, "steps[0].component_code"],
    [
      "an unknown component",
      { steps: [{ namespace: "a", component_id: "sc_01jd0000000000000000ab" }] },
      "steps[0].component_id",
    ],
    ["an unknown registry key", { steps: [{ namespace: "a", key: "nope" }] }, "steps[0].key"],
    [
      "an app that needs a connected account",
      { steps: [codeStep(), { namespace: "b", component_code: "githubAction" }] },
      "steps[1].props.github",
    ],
    [
      "a connected account, none existing yet",
      {
        steps: [
          {
            namespace: "a",
            component_code: "helpersAction",
            props: { helper_functions: { authProvisionId: "apn_1" } },
          },
        ],
      },
      "steps[0].props.helper_functions",
    ],
    ["a missing required prop", { steps: [{ namespace: "a", key: "http-send", props: {} }] }, "steps[0].props.url"],
    [
      "a prop of the wrong type",
      { steps: [{ namespace: "a", key: "http-send", props: { url: "u", count: "x" } }] },
      "steps[0].props.count",
    ],
    [
      "a prop the step has not",
      { steps: [{ namespace: "a", key: "http-send", props: { url: "u", nope: 1 } }] },
      "steps[0].props.nope",
    ],
    [
      "11 triggers",
      { steps: [codeStep()], triggers: Array.from({ length: 11 }, () => ({ type: "http" })) },
      "triggers",
    ],
    ["an email trigger", { steps: [codeStep()], triggers: [{ type: "email" }] }, "triggers[0].type"],
    [
      "an unknown trigger type",
      { steps: [codeStep()], triggers: [{ type: "http" }, { type: "ftp" }] },
      "triggers[1].type",
    ],
    [
      "a custom_response that is no boolean",
      { steps: [codeStep()], triggers: [{ type: "http", props: { custom_response: "yes" } }] },
      "triggers[0].props.custom_response",
    ],
    [
      "an unknown HTTP trigger prop",
      { steps: [codeStep()], triggers: [{ type: "http", props: { path: "/x" } }] },
      "triggers[0].props.path",
    ],
    [
      "a timer with interval and cron",
      { steps: [codeStep()], triggers: [{ type: "timer", props: { intervalSeconds: 60, cron: "* * * * *" } }] },
      "triggers[0].props",
    ],
    ["a timer with neither", { steps: [codeStep()], triggers: [{ type: "timer", props: {} }] }, "triggers[0].props"],
    [
      "a bad cron",
      { steps: [codeStep()], triggers: [{ type: "timer", props: { cron: "61 * * * *" } }] },
      "triggers[0].props.cron",
    ],
    [
      "a bad interval",
      { steps: [codeStep()], triggers: [{ type: "timer", props: { intervalSeconds: 0 } }] },
      "triggers[0].props.intervalSeconds",
    ],
    [
      "an unknown zone",
      { steps: [codeStep()], triggers: [{ type: "timer", props: { cron: "0 9 * * *", timezone: "Mars/Olympus" } }] },
      "triggers[0].props.timezone",
    ],
    [
      "a source trigger without source_id",
      { steps: [codeStep()], triggers: [{ type: "source", props: {} }] },
      "triggers[0].props.source_id",
    ],
    [
      "a source trigger with an unknown source",
      { steps: [codeStep()], triggers: [{ type: "source", props: { source_id: "dc_01jd0000000000000000ab" } }] },
      "triggers[0].props.source_id",
    ],
    [
      "a source trigger whose code does not load",
      { steps: [codeStep()], triggers: [{ type: "source", props: { component_code: "broken" } }] },
      "triggers[0].props.component_code",
    ],
    [
      "a source trigger with both source_id and code",
      {
        steps: [codeStep()],
        triggers: [{ type: "source", props: { source_id: "dc_01jd0000000000000000ab", component_code: "source" } }],
      },
      "triggers[0].props.component_code",
    ],
    [
      "a source trigger with a prop its source has not",
      {
        steps: [codeStep()],
        triggers: [{ type: "source", props: { component_code: "source", configured_props: { x: 1 } } }],
      },
      "triggers[0].props.configured_props.x",
    ],
    ["an empty name", { steps: [codeStep()], settings: { name: "" } }, "settings.name"],
    ["a name of 201 characters", { steps: [codeStep()], settings: { name: "x".repeat(201) } }, "settings.name"],
    [
      "a name with a bidi override",
      { steps: [codeStep()], settings: { name: "invoice\u202Egpj.exe" } },
      "settings.name",
    ],
    ["an unknown project", { steps: [codeStep()], project_id: "proj_01jd0000000000000000ab" }, "project_id"],
    ["an unknown template", { template_id: "tch_nothing" }, "template_id"],
    ["a template id that is no template id", { template_id: "../tch_test" }, "template_id"],
    ["a template whose steps the body replaces badly", { template_id: "tch_test", steps: [] }, "steps"],
    ["an empty external id", { steps: [codeStep()], external_id: "" }, "external_id"],
    ["an external id of 201 characters", { steps: [codeStep()], external_id: "x".repeat(201) }, "external_id"],
    ["an external id with a line break", { steps: [codeStep()], external_id: "ci\nkey" }, "external_id"],
    ["an external id with a bidi override", { steps: [codeStep()], external_id: "ci\u202Ekey" }, "external_id"],
    [
      "a configuration over 300 KB",
      {
        steps: Array.from({ length: 6 }, (_, i) => ({
          namespace: `s${i}`,
          key: "http-send",
          props: { url: "u".repeat(60_000) },
        })),
      },
      "steps",
    ],
  ];

  it.each(refusals)("answers 400 naming the field for %s, storing no workflow", async (_what, input, field) => {
    const { deps, owner } = await setUp();
    const error = await rejection(createWorkflow(deps, owner, input));
    expect(error.code).toBe("validation");
    expect(error.issues?.[0]?.field).toBe(field);
    expect(error.message.startsWith(`${field}: `)).toBe(true);
    expect((await listUserWorkflows(deps, owner, { limit: 10 })).data).toEqual([]);
  });

  it("creates a step whose app needs no account, whatever its code reads of $auth", async () => {
    const { deps, owner } = await setUp();
    const workflow = await createWorkflow(deps, owner, {
      steps: [{ namespace: "a", component_code: "helpersAction" }],
    });
    expect(workflow.steps).toHaveLength(1);
  });

  it("keeps the loader's line in a code step's error, and reports every prop problem of a step at once", async () => {
    const { deps, owner } = await setUp();
    const broken = await rejection(
      createWorkflow(deps, owner, { steps: [{ namespace: "a", component_code: "broken" }] }),
    );
    expect(broken.message).toBe("steps[0].component_code: SyntaxError: Unexpected token (3:5)");
    const props = await rejection(
      createWorkflow(deps, owner, { steps: [{ namespace: "a", key: "http-send", props: { count: 1.5, nope: 1 } }] }),
    );
    expect(props.issues?.map((issue) => issue.field).sort()).toEqual([
      "steps[0].props.count",
      "steps[0].props.nope",
      "steps[0].props.url",
    ]);
  });

  it("refuses another account's component and source as fields (400), and their workspace (404)", async () => {
    const { deps, owner, stranger, strangerAccount } = await setUp();
    const theirs = await createWorkflow(deps, stranger, { steps: [codeStep()] });
    const theirComponent = (await deps.workflows.getWorkflow(theirs.id))?.steps[0]?.componentId;
    const theirSource = await deploySource(deps, stranger, { component_code: "source" });
    const component = await rejection(
      createWorkflow(deps, owner, { steps: [{ namespace: "a", component_id: theirComponent }] }),
    );
    expect(component.issues?.[0]?.field).toBe("steps[0].component_id");
    const source = await rejection(
      createWorkflow(deps, owner, {
        steps: [codeStep()],
        triggers: [{ type: "source", props: { source_id: theirSource.id } }],
      }),
    );
    expect(source.issues?.[0]?.field).toBe("triggers[0].props.source_id");
    const workspace = await rejection(
      createWorkflow(deps, owner, { org_id: strangerAccount.workspace.id, steps: [codeStep()] }),
    );
    expect(workspace.code).toBe("not_found");
    const project = await rejection(
      createWorkflow(deps, owner, { project_id: strangerAccount.project.id, steps: [codeStep()] }),
    );
    expect(project.issues?.[0]?.field).toBe("project_id");
  });

  it("subscribes the workflow to a source trigger's source, under the workflow's workspace", async () => {
    const { deps, owner, ownerAccount } = await setUp();
    const source = await deploySource(deps, owner, { component_code: "source" });
    const created = await createWorkflow(deps, owner, {
      steps: [codeStep()],
      triggers: [{ type: "source", props: { source_id: source.id } }],
    });
    const [subscription] = await deps.subscriptions.findSubscriptions([source.id], "");
    expect(subscription).toMatchObject({
      listenerId: created.id,
      listenerKind: "workflow",
      workspaceId: ownerAccount.workspace.id,
      userId: owner.userId,
    });
    const stored = await deps.workflows.getWorkflow(created.id);
    expect(stored?.triggers).toEqual([
      { type: "source", sourceId: source.id, subscriptionId: subscription?.id, deployedByWorkflow: false },
    ]);
    // The trigger shows the Source resource.
    expect(created.triggers).toEqual([expect.objectContaining({ id: source.id, component_id: source.component_id })]);
    const twice = await rejection(
      createWorkflow(deps, owner, {
        steps: [codeStep()],
        triggers: [
          { type: "source", props: { source_id: source.id } },
          { type: "source", props: { source_id: source.id } },
        ],
      }),
    );
    expect(twice.issues?.[0]?.field).toBe("triggers[1].props.source_id");
  });
});

describe("sources deployed by a source trigger (W17)", () => {
  it("deploys the source in the workflow's workspace, follows the workflow's active, and goes with it", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, {
      steps: [codeStep()],
      triggers: [{ type: "source", props: { component_code: "source", name: "feed" } }],
    });
    const [trigger] = (await deps.workflows.getWorkflow(created.id))?.triggers ?? [];
    expect(trigger).toMatchObject({ type: "source", deployedByWorkflow: true });
    const sourceId = trigger?.type === "source" ? trigger.sourceId : "";
    expect(created.triggers).toEqual([
      expect.objectContaining({ id: sourceId, name: "feed", owner_id: created.id, active: false }),
    ]);
    expect(await deps.sources.getSource(sourceId)).toMatchObject({ active: false, workflowId: created.id });
    // The source's own view (GET /sources/{id}) shows the workflow as its owner too.
    expect(await getSource(deps, owner, sourceId)).toMatchObject({ id: sourceId, owner_id: created.id });
    expect(await deps.subscriptions.findSubscriptions([sourceId], "")).toEqual([
      expect.objectContaining({ listenerId: created.id }),
    ]);

    await updateWorkflow(deps, owner, created.id, { active: true });
    expect(await deps.sources.getSource(sourceId)).toMatchObject({ active: true });
    await updateWorkflow(deps, owner, created.id, { active: false });
    expect(await deps.sources.getSource(sourceId)).toMatchObject({ active: false });

    await deleteWorkflow(deps, owner, created.id);
    expect(await deps.sources.getSource(sourceId)).toBeUndefined();
  });

  it("forgets the workflow's paused runs on DELETE, and gives what they kept back to the workspace's stored bytes", async () => {
    const { deps, owner, ownerAccount } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http", props: {} }] });
    const workflow = (await deps.workflows.getWorkflow(created.id)) as NonNullable<
      Awaited<ReturnType<typeof deps.workflows.getWorkflow>>
    >;
    const before = (await deps.usage.getStored(ownerAccount.workspace.id)).bytes;
    for (const runId of ["run_01kab0000000000000000a", "run_01kab0000000000000000b"]) {
      const kept = await keepPause(
        deps,
        workflow,
        { kind: "workflow", workflowId: created.id, runId, trigger: "http", triggerId: "hi_1", event: { n: runId } },
        { id: runId, trigger: { type: "http", id: "hi_1" } } as WorkflowRun,
        newFlowBase(deps, runId),
        { kind: "suspend", stepId: workflow.steps[0]?.id ?? "", afterMs: 60_000, steps: { parse: { x: 1 } } },
        undefined,
        "k_1",
        deps.clock.nowMs(),
      );
      expect(kept).toBeUndefined();
    }
    expect((await deps.usage.getStored(ownerAccount.workspace.id)).bytes).toBeGreaterThan(before);
    await deleteWorkflow(deps, owner, created.id);
    expect(await deps.pausedRuns.countPending(created.id)).toBe(0);
    expect((await deps.usage.getStored(ownerAccount.workspace.id)).bytes).toBe(before);
  });

  it("leaves no source when a DELETE races a PUT that replaces the triggers, whichever writes first", async () => {
    const { deps, owner } = await setUp();
    const sourceTrigger = { triggers: [{ type: "source", props: { component_code: "source" } }] };
    const sourcesLeft = async () => (await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items;
    const workflows = deps.workflows;

    // The DELETE ends while the PUT deploys: the PUT's write finds no workflow, 404, and its source goes.
    const first = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http" }] });
    deps.workflows = Object.assign(Object.create(workflows), {
      updateWorkflow: async (record: Parameters<typeof workflows.updateWorkflow>[0]) => {
        await deleteWorkflow({ ...deps, workflows }, owner, first.id);
        return workflows.updateWorkflow(record);
      },
    });
    expect((await rejection(updateWorkflow(deps, owner, first.id, sourceTrigger))).code).toBe("not_found");
    deps.workflows = workflows;
    expect(await sourcesLeft()).toEqual([]);

    // The PUT writes while the DELETE runs, after the DELETE read the workflow: its source goes too.
    const second = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http" }] });
    const deleteRuns = deps.workflowRuns.deleteRuns.bind(deps.workflowRuns);
    deps.workflowRuns.deleteRuns = async (id) => {
      await updateWorkflow(deps, owner, second.id, sourceTrigger);
      return deleteRuns(id);
    };
    await deleteWorkflow(deps, owner, second.id);
    expect(await sourcesLeft()).toEqual([]);
    expect(await deps.workflows.getWorkflow(second.id)).toBeUndefined();
  });

  it("removes the deployment a PUT of steps made again for a workflow a DELETE removed meanwhile", async () => {
    const { deps, owner, removed } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http" }] });
    const prepare = deps.host.prepareWorkflow.bind(deps.host);
    deps.host = {
      ...deps.host,
      prepareWorkflow: async (code) => {
        await deleteWorkflow(deps, owner, created.id);
        return prepare(code);
      },
    };
    const put = updateWorkflow(deps, owner, created.id, { steps: [codeStep("b")] });
    expect((await rejection(put)).code).toBe("not_found");
    // Once by the DELETE, once more for what the PUT built after it.
    expect(removed).toEqual([created.id, created.id]);
  });

  it("gives the winner back the triggers a losing PUT stopped before its write was refused", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, {
      settings: { auto_deploy: true },
      steps: [codeStep()],
      triggers: [{ type: "source", props: { component_code: "source" } }],
    });
    const sourceId = (await deps.workflows.getWorkflow(created.id))?.triggers.flatMap((t) =>
      t.type === "source" ? [t.sourceId] : [],
    )[0] as string;
    expect(await deps.sources.getSource(sourceId)).toMatchObject({ active: true });
    // Once the losing PUT (active: false) has stopped the source, another PUT renames the workflow first.
    const store = deps.sources;
    let winner: Promise<unknown> | undefined;
    deps.sources = Object.assign(Object.create(store), {
      updateSource: async (record: Parameters<typeof store.updateSource>[0]) => {
        const saved = await store.updateSource(record);
        if (!winner && !record.active && record.deployingSince === undefined) {
          deps.sources = store;
          // A later millisecond: a write of the same millisecond and deployment is not told apart.
          deps.clock.set(deps.clock.nowMs() + 1);
          winner = updateWorkflow(deps, owner, created.id, { settings: { name: "winner" } });
          await winner;
        }
        return saved;
      },
    });
    const loser = await rejection(updateWorkflow(deps, owner, created.id, { active: false }));
    expect(loser.code).toBe("conflict");
    expect(await deps.workflows.getWorkflow(created.id)).toMatchObject({ name: "winner", active: true });
    expect(await deps.sources.getSource(sourceId)).toMatchObject({ active: true });
  });

  it("answers 409 to all but one of concurrent PUTs of triggers, keeping only the winner's source", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http" }] });
    const puts = ["a", "b", "c"].map((name) =>
      updateWorkflow(deps, owner, created.id, {
        triggers: [{ type: "source", props: { component_code: "source", name } }],
      }),
    );
    const outcomes = await Promise.allSettled(puts);
    expect(outcomes.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") expect(outcome.reason).toMatchObject({ code: "conflict" });
    }
    const stored = await deps.workflows.getWorkflow(created.id);
    const named = stored?.triggers.flatMap((trigger) => (trigger.type === "source" ? [trigger.sourceId] : [])) ?? [];
    const sources = (await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items.map(
      (source) => source.id,
    );
    expect(named).toHaveLength(1);
    expect(sources).toEqual(named);

    // The same PUT with an external_id sent twice at once: both answer the workflow it wrote.
    const again = { external_id: "ci", triggers: [{ type: "source", props: { component_code: "source", name: "d" } }] };
    const [first, second] = await Promise.all([0, 1].map(() => updateWorkflow(deps, owner, created.id, again)));
    expect(second).toEqual(first);
    const left = (await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items;
    expect(left.map((source) => source.id)).toEqual([first?.triggers[0]?.id]);
  });

  it("deploys nothing when another part of the body is refused, and deletes a replaced trigger's source", async () => {
    const { deps, owner } = await setUp();
    const refused = await rejection(
      createWorkflow(deps, owner, {
        steps: [{ namespace: "a", component_code: "broken" }],
        triggers: [{ type: "source", props: { component_code: "source" } }],
      }),
    );
    expect(refused.issues?.[0]?.field).toBe("steps[0].component_code");
    expect((await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items).toEqual([]);

    const created = await createWorkflow(deps, owner, {
      settings: { auto_deploy: true },
      steps: [codeStep()],
      triggers: [{ type: "source", props: { component_code: "source" } }],
    });
    const before = (await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items.map((s) => s.id);
    expect(before).toHaveLength(1);
    await updateWorkflow(deps, owner, created.id, { triggers: [{ type: "http" }] });
    expect((await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items).toEqual([]);
  });
});

describe("trigger sources within the request's time (AWS, issue 16)", () => {
  it("deploys a trigger source without hooks in the request; hands one whose hooks cannot run in it to the finisher", async () => {
    const { deps, owner } = await setUp();
    deps.runtime = { ...deps.runtime, invocationTimeoutMs: 30_000 };
    const handedOver: string[] = [];
    deps.deployFinisher = { finishLater: async (id) => void handedOver.push(id) };
    // Room for the function's step (5 s), not for a hook's whole limit.
    const timed = () => ({ answerByMs: deps.clock.nowMs() + 29_999 });
    const plain = { type: "source", props: { component_code: "source" } };
    const created = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [plain] }, timed());
    const [deployed] = (await deps.sources.listSourcesOfUser(owner.userId, { limit: 10 })).items;
    expect(deployed).toMatchObject({ workflowId: created.id, active: false });
    expect(deployed).not.toHaveProperty("deployingSince");
    expect(handedOver).toEqual([]);

    for (const code of ["hooks", "deactivating"]) {
      const body = { steps: [codeStep()], triggers: [{ type: "source", props: { component_code: code } }] };
      const answered = await createWorkflow(deps, owner, body, timed());
      expect(answered.triggers).toHaveLength(1);
    }
    // deploy() does not fit (the first); a deactivate hook alone is no step of a create (the second).
    expect(handedOver).toHaveLength(1);
  });
});

describe("reading workflows", () => {
  it("gets and lists the caller's workflows newest first with paging; another account's answer 404", async () => {
    const { deps, owner, stranger, ownerAccount } = await setUp();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      deps.clock.set(Date.UTC(2026, 10, 26, 8, i));
      ids.push((await createWorkflow(deps, owner, { steps: [codeStep()] })).id);
    }
    const firstPage = await listUserWorkflows(deps, owner, { limit: 2 });
    expect(firstPage.data.map((w) => w.id)).toEqual([ids[2], ids[1]]);
    expect(firstPage.page_info).toMatchObject({ total_count: 3, count: 2 });
    const after = firstPage.page_info.end_cursor ?? "";
    const secondPage = await listUserWorkflows(deps, owner, toPageQuery({ limit: 2, after }));
    expect(secondPage.data.map((w) => w.id)).toEqual([ids[0]]);
    const inWorkspace = await listWorkspaceWorkflows(deps, owner, ownerAccount.workspace.id, { limit: 10 });
    expect(inWorkspace.data.map((w) => w.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect((await getWorkflow(deps, owner, ids[0] as string)).id).toBe(ids[0]);
    expect((await rejection(getWorkflow(deps, owner, ids[0] as string, "o_01jd0000000000000000ab"))).code).toBe(
      "not_found",
    );

    expect(await listUserWorkflows(deps, stranger, { limit: 10 })).toMatchObject({ data: [] });
    const id = ids[0] as string;
    for (const attempt of [
      getWorkflow(deps, stranger, id),
      updateWorkflow(deps, stranger, id, { active: true }),
      updateWorkflow(deps, stranger, id, { steps: [codeStep()] }),
      deleteWorkflow(deps, stranger, id),
      listWorkflowEvents(deps, stranger, id, {}, "emits"),
      listWorkflowEvents(deps, stranger, id, {}, "errors"),
      listWorkspaceWorkflows(deps, stranger, ownerAccount.workspace.id, { limit: 10 }),
    ]) {
      expect((await rejection(attempt)).code).toBe("not_found");
    }
    expect(await deps.workflows.getWorkflow(id)).toMatchObject({ active: false });
  });

  it("lists a workflow's emits and its $errors apart, each with the sources' paging", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()] });
    const meta = {};
    await deps.events.appendEvents(
      created.id,
      [
        { channel: "", event: { raw_event: { n: 1 } }, emitId: "e1", meta },
        { channel: "$errors", event: { error: { message: "boom" } }, emitId: "e2", meta },
        { channel: "", event: { raw_event: { n: 2 } }, emitId: "e3", meta },
      ],
      deps.clock.nowMs(),
    );
    const emits = await listWorkflowEvents(deps, owner, created.id, { limit: 1 }, "emits");
    expect(emits.data.map((event) => event.event)).toEqual([{ raw_event: { n: 2 } }]);
    expect(emits.page_info.total_count).toBe(2);
    const errors = await listWorkflowEvents(deps, owner, created.id, {}, "errors");
    expect(errors.data.map((event) => event.event)).toEqual([{ error: { message: "boom" } }]);
    expect(
      (await rejection(listWorkflowEvents(deps, owner, created.id, { expand: "all" }, "emits"))).issues?.[0]?.field,
    ).toBe("expand");
  });
});

describe("the code a deployment runs", () => {
  it("is prepared at create and at a PUT of steps as a run builds it: one module per distinct code, in step order", async () => {
    const { deps, owner, prepared } = await setUp();
    const send = { namespace: "send", key: "http-send", props: { url: "https://example.com" } };
    const created = await createWorkflow(deps, owner, { steps: [codeStep("a"), send, codeStep("b")] });
    await updateWorkflow(deps, owner, created.id, { steps: [send, codeStep("a")] });
    const record = await deps.workflows.getWorkflow(created.id);
    const loaded = await Promise.all(
      (record?.steps ?? []).map(async (step) => ({
        component: (await deps.components.getComponent(step.componentId))!,
      })),
    );
    expect(prepared.map((code) => code.steps.map((step) => step.code))).toEqual([
      ["code", "action"],
      ["action", "code"],
    ]);
    expect(prepared[1]).toEqual(workflowCode(record!, loaded));
  });
});

describe("{{ ... }} expressions in a step's props", () => {
  it("takes an expression for a plain prop of any type, as text, and still checks other values", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, {
      steps: [
        {
          namespace: "send",
          component_code: "action",
          props: {
            url: "https://example.com/{{steps.trigger.event.body.path}}",
            count: "{{steps.trigger.event.body.n}}",
          },
        },
      ],
    });
    expect(JSON.parse(created.steps[0]?.configured_props_json as string)).toEqual({
      url: "https://example.com/{{steps.trigger.event.body.path}}",
      count: "{{steps.trigger.event.body.n}}",
    });
    expect(
      await rejection(
        createWorkflow(deps, owner, {
          steps: [{ namespace: "send", component_code: "action", props: { url: "x", count: "three" } }],
        }),
      ),
    ).toMatchObject({ issues: [{ field: "steps[0].props.count", message: "must be an integer" }] });
  });

  it("refuses an expression where Sluice binds a structure (an app prop), and in a source's props", async () => {
    const { deps, owner } = await setUp();
    expect(
      await rejection(
        createWorkflow(deps, owner, {
          steps: [{ namespace: "gh", component_code: "githubAction", props: { github: "{{steps.a.account}}" } }],
        }),
      ),
    ).toMatchObject({ issues: [{ field: "steps[0].props.github" }] });
    expect(
      await rejection(
        deploySource(deps, owner, { component_code: "action", configured_props: { url: "x", count: "{{1}}" } }),
      ),
    ).toMatchObject({ code: "validation" });
  });
});

describe("a step whose action has additionalProps", () => {
  const dynamicStep = (props: Record<string, unknown>) => ({ namespace: "d", component_code: "dynamic", props });

  it("runs additionalProps on the static props given and validates every prop against the final set", async () => {
    const { deps, owner, probes } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "count", value: 3 })] });
    // The probe saw the static props only.
    expect(probes.map((probe) => probe.props)).toEqual([{ mode: "count" }]);
    expect(JSON.parse(created.steps[0]?.configured_props_json as string)).toEqual({ mode: "count", value: 3 });
    const stored = await deps.workflows.getWorkflow(created.id);
    expect(stored?.steps[0]?.propDefinitions?.map((def) => def.name)).toEqual(["mode", "value"]);
    // The step's view offers the props it takes, the dynamic one too.
    const offered = created.steps[0]?.savedComponent?.configurableProps as { name: string }[];
    expect(offered.map((prop) => prop.name)).toEqual(["mode", "value"]);
  });

  it("refuses a dynamic prop's bad value, or a prop neither set declares, naming it under the step", async () => {
    const { deps, owner } = await setUp();
    expect(
      await rejection(createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "count", value: 0 })] })),
    ).toMatchObject({ code: "validation", issues: [{ field: "steps[0].props.value", message: "must be at least 1" }] });
    expect(
      await rejection(createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "none", value: 2 })] })),
    ).toMatchObject({ issues: [{ field: "steps[0].props.value" }] });
    expect(await rejection(createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "count" })] }))).toMatchObject({
      issues: [{ field: "steps[0].props.value", message: "is required" }],
    });
  });

  it("answers 400 on the step when additionalProps fails or adds what only a source may have", async () => {
    const { deps, owner } = await setUp();
    expect(await rejection(createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "fails" })] }))).toMatchObject({
      code: "validation",
      message: "steps[0].props: additionalProps failed: no such mode",
    });
    expect(await rejection(createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "timer" })] }))).toMatchObject({
      message: expect.stringContaining("$.interface.timer prop timer; a step cannot have it"),
    });
    expect((await listUserWorkflows(deps, owner, { limit: 10 })).page_info.total_count).toBe(0);
  });

  it("takes a dynamic prop of a value type named like $.airtable.baseId, and drops one named __proto__", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [dynamicStep({ mode: "airtable", base: "app1" })] });
    expect(JSON.parse(created.steps[0]?.configured_props_json as string)).toEqual({ mode: "airtable", base: "app1" });
    expect(
      await rejection(
        createWorkflow(deps, owner, { steps: [dynamicStep(JSON.parse('{"mode": "proto", "__proto__": {"x": 1}}'))] }),
      ),
    ).toMatchObject({ issues: [{ field: "steps[0].props.__proto__", message: "is not a prop of this component" }] });
  });

  it("runs the steps' additionalProps within one time limit together: a step past it is refused", async () => {
    const { deps, owner, probes } = await setUp();
    slowProbe.onRun = () => deps.clock.set(deps.clock.nowMs() + 3_000);
    try {
      // The time limit is 5 s here: two slow probes take 6 s, so the third does not start.
      const steps = ["a", "b", "c"].map((namespace) => ({ ...dynamicStep({ mode: "slow" }), namespace }));
      expect(await rejection(createWorkflow(deps, owner, { steps }))).toMatchObject({
        code: "validation",
        message: expect.stringMatching(
          /^steps\[2\]\.props: additionalProps was not run: .* took the time limit \(5000 ms\) together/,
        ),
      });
      expect(probes).toHaveLength(2);
    } finally {
      slowProbe.onRun = undefined;
    }
  });

  it("keeps no final set for a component without additionalProps", async () => {
    const { deps, owner, probes } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()] });
    expect((await deps.workflows.getWorkflow(created.id))?.steps[0]?.propDefinitions).toBeUndefined();
    expect(probes).toEqual([]);
  });
});

describe("updateWorkflow", () => {
  it("refuses the fields only a create takes (template_id, settings.auto_deploy), naming them, and changes nothing", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, { steps: [codeStep()], triggers: [{ type: "http" }] });
    // The body schema keeps them for the core to refuse, rather than stripping them.
    const body = updateWorkflowBody.parse({ template_id: "tch_x", settings: { auto_deploy: true } });
    expect(body).toEqual({ template_id: "tch_x", settings: { auto_deploy: true } });
    await expect(updateWorkflow(deps, owner, created.id, { template_id: "tch_x" })).rejects.toMatchObject({
      code: "validation",
      message: expect.stringMatching(/^template_id: is taken only by POST \/v1\/workflows/),
    });
    await expect(
      updateWorkflow(deps, owner, created.id, { active: true, settings: { auto_deploy: true } }),
    ).rejects.toMatchObject({ code: "validation", message: expect.stringContaining("settings.auto_deploy") });
    expect((await getWorkflow(deps, owner, created.id)).active).toBe(false);
  });

  it("activates and deactivates without a new deployment or new ids", async () => {
    const { deps, owner, prepared } = await setUp();
    const created = await createWorkflow(deps, owner, {
      steps: [codeStep()],
      triggers: [{ type: "http" }, { type: "timer", props: { intervalSeconds: 60 } }],
    });
    const on = await updateWorkflow(deps, owner, created.id, { active: true });
    expect(on).toMatchObject({ active: true, deployment_id: created.deployment_id, triggers: created.triggers });
    expect(await deps.workflows.listActiveTimerTriggers()).toEqual([
      { workflowId: created.id, timerId: created.triggers[1]?.id, spec: { intervalSeconds: 60 } },
    ]);
    const off = await updateWorkflow(deps, owner, created.id, { active: false });
    expect(off.active).toBe(false);
    expect(await deps.workflows.listActiveTimerTriggers()).toEqual([]);
    expect(prepared).toHaveLength(1);
  });

  it("replaces steps and triggers with a new deployment, keeping ids by namespace and by position", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, {
      settings: { name: "Before" },
      steps: [codeStep("a"), codeStep("b")],
      triggers: [{ type: "http" }, { type: "timer", props: { intervalSeconds: 60 } }],
    });
    deps.clock.set(Date.UTC(2026, 10, 26, 9));
    const same = await updateWorkflow(deps, owner, created.id, {
      steps: [codeStep("a"), codeStep("b")],
      triggers: [{ type: "http" }, { type: "timer", props: { intervalSeconds: 60 } }],
    });
    expect(same.deployment_id).not.toBe(created.deployment_id);
    expect(same.steps.map((s) => s.id)).toEqual(created.steps.map((s) => s.id));
    expect(same.triggers).toEqual(created.triggers);

    const changed = await updateWorkflow(deps, owner, created.id, {
      settings: { name: "After" },
      steps: [codeStep("b"), { namespace: "c", component_code: "other" }],
      triggers: [
        { type: "timer", props: { intervalSeconds: 120 } },
        { type: "http", props: { custom_response: true } },
        { type: "http" },
      ],
    });
    expect(changed.name).toBe("After");
    expect(changed.steps[0]?.id).toBe(created.steps[1]?.id);
    expect(changed.steps[1]?.id).not.toBe(created.steps[0]?.id);
    const [timer, http, extra] = changed.triggers as Record<string, unknown>[];
    const [oldHttp, oldTimer] = created.triggers as Record<string, unknown>[];
    expect(timer).toMatchObject({ id: oldTimer?.id, interval_seconds: 120 });
    expect(timer?.schedule_changed_at).toBe(Date.UTC(2026, 10, 26, 9) / 1000);
    expect(http).toMatchObject({ id: oldHttp?.id, key: oldHttp?.key, custom_response: true });
    expect(extra?.id).not.toBe(oldHttp?.id);
    // An item naming a trigger keeps that one, wherever it is.
    const named = await updateWorkflow(deps, owner, created.id, {
      triggers: [{ type: "http" }, { id: extra?.id as string, type: "http" }],
    });
    expect(named.triggers.map((t) => t.id)).toEqual([http?.id, extra?.id]);
    expect((await rejection(updateWorkflow(deps, owner, created.id, { steps: [] }))).issues?.[0]?.field).toBe("steps");
  });

  it("moves a source trigger's subscription with the list of triggers", async () => {
    const { deps, owner } = await setUp();
    const first = await deploySource(deps, owner, { component_code: "source", name: "first" });
    const second = await deploySource(deps, owner, { component_code: "source", name: "second" });
    const created = await createWorkflow(deps, owner, {
      steps: [codeStep()],
      triggers: [{ type: "source", props: { source_id: first.id } }],
    });
    await updateWorkflow(deps, owner, created.id, {
      triggers: [{ type: "source", props: { source_id: second.id } }],
    });
    expect(await deps.subscriptions.findSubscriptions([first.id], "")).toEqual([]);
    expect(await deps.subscriptions.findSubscriptions([second.id], "")).toEqual([
      expect.objectContaining({ listenerId: created.id }),
    ]);
  });
});

describe("deleteWorkflow", () => {
  it("removes the workflow, the subscriptions naming it, its events, runs, sends' dead letters and deployment; a given source stays", async () => {
    const { deps, owner, removed } = await setUp();
    const source = await deploySource(deps, owner, { component_code: "source" });
    const webhook = await createWebhook(deps, owner, { url: "http://127.0.0.1:9/in" });
    const created = await createWorkflow(deps, owner, {
      settings: { auto_deploy: true },
      steps: [codeStep()],
      triggers: [
        { type: "source", props: { source_id: source.id } },
        { type: "timer", props: { intervalSeconds: 60 } },
      ],
    });
    await createSubscription(deps, owner, { emitter_id: created.id, listener_id: webhook.id, event_name: "$errors" });
    await deps.events.appendEvents(
      created.id,
      [{ channel: "", event: { raw_event: 1 }, emitId: "e1", meta: {} }],
      deps.clock.nowMs(),
    );
    const now = deps.clock.nowMs();
    await deps.workflowRuns.beginRun(
      runningRun({
        id: "run_01jd0000000000000000ab",
        workflowId: created.id,
        deploymentId: created.deployment_id,
        trigger: { type: "timer", id: "ti_x" },
        startedAt: now,
      }),
      now,
    );
    // A $.send.http that failed every attempt: its dead letter holds the request, credentials included.
    await deps.deadLetters.putDeadLetter(
      sendDeadLetter(created.id, owner.userId, now, "dlv_01jd0000000000000000ab", {
        kind: "http",
        workflowId: created.id,
        request: { method: "POST", url: "https://example.com/x", headers: {}, auth: { username: "u", password: "p" } },
      }),
    );

    expect(await deleteWorkflow(deps, owner, created.id)).toEqual({ id: created.id, deleted: true });
    expect(await deps.workflows.getWorkflow(created.id)).toBeUndefined();
    expect(await deps.workflows.listActiveTimerTriggers()).toEqual([]);
    expect(await deps.subscriptions.findSubscriptions([source.id], "")).toEqual([]);
    expect(await deps.subscriptions.findSubscriptions([created.id], "$errors")).toEqual([]);
    expect((await deps.events.listEvents(created.id, { limit: 10 })).items).toEqual([]);
    expect((await deps.workflowRuns.listRuns(created.id, { limit: 10 })).items).toEqual([]);
    expect((await deps.deadLetters.listDeadLetters(created.id, { limit: 10 })).items).toEqual([]);
    expect(removed).toEqual([created.id]);
    expect(await deps.sources.getSource(source.id)).toBeDefined();
    expect((await rejection(deleteWorkflow(deps, owner, created.id))).code).toBe("not_found");
  });
});

describe("external_id (design 1.4)", () => {
  const definition = (extra: Record<string, unknown> = {}) => ({
    settings: { name: "CI" },
    steps: [codeStep("a"), codeStep("b")],
    triggers: [{ type: "http" }, { type: "timer", props: { intervalSeconds: 60 } }],
    ...extra,
  });

  it("stores it on create; the same create again answers that workflow and makes nothing", async () => {
    const { deps, owner, prepared } = await setUp();
    const created = await createWorkflow(deps, owner, definition({ external_id: "ci-orders" }));
    expect(created.external_id).toBe("ci-orders");
    // The same body, its keys in another order: the same request.
    const again = await createWorkflow(deps, owner, {
      external_id: "ci-orders",
      triggers: [{ props: { intervalSeconds: 60 }, type: "timer" }, { type: "http" }].reverse(),
      steps: [codeStep("a"), codeStep("b")],
      settings: { name: "CI" },
    });
    expect(again).toEqual(created);
    expect((await listUserWorkflows(deps, owner, { limit: 10 })).data.map((w) => w.id)).toEqual([created.id]);
    expect(prepared).toHaveLength(1);
  });

  it("answers 409 naming the workflow when the external id names one with another definition", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, definition({ external_id: "ci-orders" }));
    const error = await rejection(
      createWorkflow(deps, owner, definition({ external_id: "ci-orders", settings: { name: "Other" } })),
    );
    expect(error.code).toBe("conflict");
    expect(error.message).toBe(`external_id: already names workflow ${created.id} with another definition`);
    expect((await listUserWorkflows(deps, owner, { limit: 10 })).data).toHaveLength(1);
  });

  it("is unique per workspace: another account may use the same external id", async () => {
    const { deps, owner, stranger } = await setUp();
    const mine = await createWorkflow(deps, owner, definition({ external_id: "ci-orders" }));
    const theirs = await createWorkflow(deps, stranger, definition({ external_id: "ci-orders" }));
    expect(theirs.id).not.toBe(mine.id);
    expect(theirs.org_id).not.toBe(mine.org_id);
  });

  it("makes one workflow of two creates at once; the other answers it and leaves no deployment behind", async () => {
    const { deps, owner, prepared, removed } = await setUp();
    const [first, second] = await Promise.all([
      createWorkflow(deps, owner, definition({ external_id: "race" })),
      createWorkflow(deps, owner, definition({ external_id: "race" })),
    ]);
    expect(second.id).toBe(first.id);
    expect((await listUserWorkflows(deps, owner, { limit: 10 })).data.map((w) => w.id)).toEqual([first.id]);
    // Both were built before the store's guard refused one; the loser's deployment is removed.
    expect(prepared.map((code) => code.workflowId).filter((id) => id !== first.id)).toEqual(removed);
    expect(removed).toHaveLength(1);
  });

  it("a PUT repeating the stored external id and body changes nothing: no deployment, no new times", async () => {
    const { deps, owner, prepared } = await setUp();
    const created = await createWorkflow(deps, owner, definition({ settings: { auto_deploy: true } }));
    deps.clock.set(Date.UTC(2026, 10, 26, 9));
    const put = definition({ external_id: "ci-orders", active: true });
    delete (put as { settings?: unknown }).settings;
    const first = await updateWorkflow(deps, owner, created.id, put);
    expect(first.external_id).toBe("ci-orders");
    expect(first.deployment_id).not.toBe(created.deployment_id);
    const stored = await deps.workflows.getWorkflow(created.id);
    const builds = prepared.length;

    deps.clock.set(Date.UTC(2026, 10, 26, 10));
    const again = await updateWorkflow(deps, owner, created.id, structuredClone(put));
    expect(again).toEqual(first);
    expect(await deps.workflows.getWorkflow(created.id)).toEqual(stored);
    expect(prepared).toHaveLength(builds);

    // The same external id with another body is a PUT, and stores the new hash.
    const renamed = await updateWorkflow(deps, owner, created.id, { ...put, settings: { name: "Renamed" } });
    expect(renamed).toMatchObject({ name: "Renamed", external_id: "ci-orders" });
    expect(renamed.deployment_id).not.toBe(first.deployment_id);
    expect((await deps.workflows.getWorkflow(created.id))?.requestHash).not.toBe(stored?.requestHash);
  });

  it("a PUT without external_id keeps the id but not the hash: the old body is then a real PUT again", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, definition({ external_id: "ci-orders" }));
    const put = { external_id: "ci-orders", steps: [codeStep("a")] };
    const first = await updateWorkflow(deps, owner, created.id, put);
    const off = await updateWorkflow(deps, owner, created.id, { active: true });
    expect(off.external_id).toBe("ci-orders");
    expect((await deps.workflows.getWorkflow(created.id))?.requestHash).toBeUndefined();
    const again = await updateWorkflow(deps, owner, created.id, put);
    expect(again.deployment_id).not.toBe(first.deployment_id);
    expect(again.active).toBe(true);
  });

  it("a PUT may give a workflow a new external id, not one another workflow of the workspace has", async () => {
    const { deps, owner, stranger } = await setUp();
    const one = await createWorkflow(deps, owner, definition({ external_id: "one" }));
    const two = await createWorkflow(deps, owner, definition());
    const error = await rejection(updateWorkflow(deps, owner, two.id, { external_id: "one", active: true }));
    expect(error.code).toBe("conflict");
    expect(error.message).toBe(`external_id: already names workflow ${one.id} of this workspace`);
    expect((await deps.workflows.getWorkflow(two.id))?.active).toBe(false);
    expect((await updateWorkflow(deps, owner, two.id, { external_id: "two" })).external_id).toBe("two");
    // Another account's workflow stays 404 whatever the external id.
    expect((await rejection(updateWorkflow(deps, stranger, one.id, { external_id: "one" }))).code).toBe("not_found");
    const bad = await rejection(updateWorkflow(deps, owner, one.id, { external_id: "" }));
    expect(bad.issues?.[0]?.field).toBe("external_id");
  });
});

describe("templates (design 1.5)", () => {
  it("creates the template's workflow, with its name, steps and triggers", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, { template_id: "tch_test" });
    expect(created).toMatchObject({ name: "From the template", active: false });
    expect(created.steps.map((step) => [step.namespace, step.component_key])).toEqual([
      ["parse", null],
      ["send", "http-send"],
    ]);
    expect(created.triggers).toEqual([
      expect.objectContaining({ custom_response: true, endpoint_url: expect.stringContaining("/http/") }),
      expect.objectContaining({ interval_seconds: 600 }),
    ]);
    // A template without a name in its settings names the workflow after itself.
    expect((await createWorkflow(deps, owner, { template_id: "tch_unnamed" })).name).toBe("Unnamed settings");
  });

  it("takes the body's steps and triggers over the template's, and merges settings key by key", async () => {
    const { deps, owner } = await setUp();
    const created = await createWorkflow(deps, owner, {
      template_id: "tch_test",
      settings: { auto_deploy: true },
      triggers: [],
    });
    expect(created).toMatchObject({ name: "From the template", active: true, triggers: [] });
    expect(created.steps).toHaveLength(2);
    const replaced = await createWorkflow(deps, owner, {
      template_id: "tch_test",
      settings: { name: "Mine" },
      steps: [codeStep("mine")],
    });
    expect(replaced).toMatchObject({ name: "Mine", active: false });
    expect(replaced.steps.map((step) => step.namespace)).toEqual(["mine"]);
    expect(replaced.triggers).toHaveLength(2);
  });
});

describe("the configuration's size (design 2.4)", () => {
  it("refuses a configuration over 300 KB before storing or building anything", async () => {
    const { deps, owner, prepared } = await setUp();
    const big = (i: number) => ({ namespace: `s${i}`, key: "http-send", props: { url: "u".repeat(60_000) } });
    const error = await rejection(createWorkflow(deps, owner, { steps: Array.from({ length: 6 }, (_, i) => big(i)) }));
    expect(error.message).toMatch(/^steps: the workflow's configuration is over 300 KB \(\d+ bytes, at most 307200\)$/);
    expect(prepared).toEqual([]);
    const created = await createWorkflow(deps, owner, { steps: [big(0)] });
    const put = await rejection(
      updateWorkflow(deps, owner, created.id, { steps: Array.from({ length: 6 }, (_, i) => big(i)) }),
    );
    expect(put.issues?.[0]?.field).toBe("steps");
    expect((await deps.workflows.getWorkflow(created.id))?.steps).toHaveLength(1);
    expect(prepared).toHaveLength(1);
  });
});

describe("a workflow's dead letters (its sends that failed every attempt)", () => {
  async function withDeadLetters() {
    const set = await setUp();
    const queued: DeliveryRecord[] = [];
    set.deps.deliveries = {
      enqueue: async (batch) => {
        queued.push(...structuredClone([...batch]));
      },
    };
    const created = await createWorkflow(set.deps, set.owner, {
      settings: { auto_deploy: true },
      steps: [codeStep()],
      triggers: [{ type: "http" }],
    });
    const now = set.deps.clock.nowMs();
    const dead = (id: string, target: DeliveryTarget) => sendDeadLetter(created.id, set.owner.userId, now, id, target);
    const http = (url: string): DeliveryTarget => ({
      kind: "http",
      workflowId: created.id,
      request: {
        method: "POST",
        url,
        headers: { Authorization: "Bearer t-1", "X-Kind": "order" },
        params: { client_secret: "c-2", q: "z" },
        auth: { username: "u", password: "p-3" },
        data: { a: 1 },
      },
    });
    return { ...set, queued, created, dead, http, now };
  }

  it("lists them newest first with their credentials redacted, to the workflow's members only", async () => {
    const { deps, owner, stranger, created, dead, http } = await withDeadLetters();
    await deps.deadLetters.putDeadLetter(dead("dlv_01", http("https://ann:pw-4@example.com/x?api_key=k-5&page=2")));
    await deps.deadLetters.putDeadLetter(
      dead("dlv_02", { kind: "s3", workflowId: created.id, bucket: "b", key: "in/run-0.json", body: { x: 1 } }),
    );
    const page = await listWorkflowDeadLetters(deps, owner, created.id, toPageQuery({ limit: 10 }));
    expect(page.page_info).toMatchObject({ total_count: 2, count: 2 });
    expect(page.data).toEqual([
      expect.objectContaining({
        id: "dlv_02",
        type: "s3",
        request: null,
        s3: { bucket: "b", key: "in/run-0.json", payload: { x: 1 } },
      }),
      {
        id: "dlv_01",
        workflow_id: created.id,
        run_id: "run_01jd0000000000000000ab",
        type: "http",
        request: {
          method: "POST",
          url: "https://ann:%5Bredacted%5D@example.com/x?api_key=%5Bredacted%5D&page=2",
          headers: { Authorization: "[redacted]", "X-Kind": "order" },
          params: { client_secret: "[redacted]", q: "z" },
          auth: { username: "u", password: "[redacted]" },
          data: { a: 1 },
        },
        s3: null,
        attempts: 8,
        last_error: "HTTP 500",
        created_at: expect.any(Number),
        failed_at: expect.any(Number),
      },
    ]);
    const text = JSON.stringify(page);
    for (const secret of ["t-1", "c-2", "p-3", "pw-4", "k-5"]) expect(text).not.toContain(secret);
    // A URL without credentials is shown as it was written.
    await deps.deadLetters.putDeadLetter(dead("dlv_03", http("http://example.com/a b?page=1")));
    const [plain] = (await listWorkflowDeadLetters(deps, owner, created.id, toPageQuery({ limit: 1 }))).data;
    expect(plain?.request?.url).toBe("http://example.com/a b?page=1");
    expect((await rejection(listWorkflowDeadLetters(deps, stranger, created.id, toPageQuery({})))).code).toBe(
      "not_found",
    );
    expect((await rejection(listWorkflowDeadLetters(deps, owner, "p_missing", toPageQuery({})))).code).toBe(
      "not_found",
    );
  });

  it("replays one whole under its id, then the oldest ones in order; a stranger queues nothing", async () => {
    const { deps, owner, stranger, created, dead, http, queued, now } = await withDeadLetters();
    for (const id of ["dlv_01", "dlv_02", "dlv_03", "dlv_04"]) {
      await deps.deadLetters.putDeadLetter(dead(id, http(`https://example.com/${id}`)));
    }
    expect((await rejection(replayWorkflowDeadLetter(deps, stranger, created.id, "dlv_01"))).code).toBe("not_found");
    expect((await rejection(replayAllWorkflowDeadLetters(deps, stranger, created.id))).code).toBe("not_found");
    expect(queued).toEqual([]);

    expect(await replayWorkflowDeadLetter(deps, owner, created.id, "dlv_03")).toEqual({
      id: "dlv_03",
      workflow_id: created.id,
      replayed: true,
    });
    const {
      userId: _userId,
      failedAt: _failedAt,
      lastError: _lastError,
      ...delivery
    } = dead("dlv_03", http("https://example.com/dlv_03"));
    expect(queued).toEqual([{ ...delivery, attempts: 0, nextAttemptAt: now }]);
    expect((await rejection(replayWorkflowDeadLetter(deps, owner, created.id, "dlv_03"))).code).toBe("not_found");

    expect(await replayAllWorkflowDeadLetters(deps, owner, created.id, 2)).toEqual({
      workflow_id: created.id,
      replayed: 2,
      remaining: 1,
    });
    expect(queued.map((d) => d.id)).toEqual(["dlv_03", "dlv_01", "dlv_02"]);
    expect((await deps.deadLetters.listDeadLetters(created.id, { limit: 10 })).items.map((d) => d.id)).toEqual([
      "dlv_04",
    ]);
  });
});
