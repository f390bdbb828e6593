import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import { invalid } from "#core/errors";
import type { Deps } from "#core/ports/deps";
import { timerTargetId } from "#core/ports/timers";
import { DEPLOY_ABANDONED_AFTER_MS, finishDeploy, getSource, recoverInterruptedDeploys } from "#core/sources";
import { createWorkflow, deleteWorkflow, getWorkflow, updateWorkflow } from "#core/workflows";
import { route as createRoute } from "#http/create-workflow";
import { route as updateRoute } from "#http/update-workflow";
import { failedHook, killPoint, never, runHandedOver } from "../../support/deploy-kill-points.ts";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";

/**
 * Workflows whose `type: "source"` triggers deploy a source, within the request's time (issue 16,
 * docs/aws.md "Deploy time budget"): a trigger source's steps that do not fit go to the deploy
 * finisher as `POST /v1/sources`'s do, the workflow is answered with it `deploying`, and the
 * workflow's `PUT` activates and deactivates its sources with the request's time too.
 */

/** What each test code describes as: a workflow step, a source with every hook and a timer, a plain source. */
const DESCRIPTIONS: Record<string, Partial<ComponentDescription>> = {
  step: { type: "action" },
  hooked: {
    hooks: ["deploy", "activate", "deactivate"],
    props: [{ name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } }],
  },
  plain: {},
};

/** Time the scripted steps take on the test's clock. */
const PREPARE_MS = 3_000;
const HOOK_MS = 1_000;
/** The hook limit of an AWS deployment by default: no hook fits in API Gateway's 30 s. */
const HOOK_LIMIT_MS = 30_000;

type HangPoint = "store" | "hand-over" | "activate";

interface Options {
  /** Hooks that fail: `<kind> <code>`, while in the set. */
  failing?: Set<string>;
  /** Where the process is killed (hangs) the first time it gets there. */
  hangAt?: HangPoint;
  /** A deploy finisher whose invoke fails (Lambda refused the job). */
  finisherFails?: boolean;
}

async function setUp(options: Options = {}) {
  const failing = options.failing ?? new Set<string>();
  /** What the host did, in order: `prepare <code>`, `<hook> <code>`. */
  const ops: string[] = [];
  const timers: string[] = [];
  /** The jobs given to the finisher, each with whether its workflow and a subscription to it existed then. */
  const handedOver: string[] = [];
  const { hangs, reached } = killPoint<HangPoint>(options.hangAt);
  const { host } = scriptedHost();
  let deps: Deps & { clock: { nowMs(): number; set(ms: number): void } };
  deps = memoryDeps(Date.UTC(2026, 10, 27, 0), {
    host: {
      ...host,
      describe: async (code) => {
        const description = DESCRIPTIONS[code];
        if (!description) throw invalid("component_code", "unknown test code");
        return { ...(await host.describe(code)), ...description, name: code };
      },
      prepare: async (code) => {
        ops.push(`prepare ${code.code}`);
        deps.clock.set(deps.clock.nowMs() + PREPARE_MS);
      },
      invoke: async (code, invocation, handlers) => {
        if (invocation.kind === "activate" && hangs("activate")) return never();
        ops.push(`${invocation.kind} ${code.code}`);
        deps.clock.set(deps.clock.nowMs() + HOOK_MS);
        if (failing.has(`${invocation.kind} ${code.code}`)) {
          return failedHook(invocation.invocationId, deps.clock.nowMs());
        }
        return host.invoke(code, invocation, handlers);
      },
    },
    timers: {
      schedule: async (target) => void timers.push(`schedule ${timerTargetId(target)}`),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
  });
  deps.runtime = { ...deps.runtime, invocationTimeoutMs: HOOK_LIMIT_MS };
  const workflows = deps.workflows;
  const store = workflows.createWorkflow.bind(workflows);
  workflows.createWorkflow = async (workflow) => (hangs("store") ? never() : store(workflow));
  const account = await accountIn(deps, "builder");
  const caller = { userId: account.user.id };
  const withFinisher = () => {
    deps.deployFinisher = {
      finishLater: async (id) => {
        if (hangs("hand-over")) return never();
        if (options.finisherFails) throw new Error("Lambda said no");
        handedOver.push(id);
      },
    };
  };
  return {
    deps,
    caller,
    ops,
    timers,
    handedOver,
    reached,
    withFinisher,
    /** The deadline of an AWS route: room for the function (5 s), never for a hook's whole limit. */
    timed: () => ({ answerByMs: deps.clock.nowMs() + 29_000 }),
    /** Runs the finisher's jobs handed over so far, as Lambda would. */
    finish: () => runHandedOver(deps, handedOver),
    sourcesLeft: async () => (await deps.sources.listSourcesOfUser(caller.userId, { limit: 20 })).items,
    subscribers: async (sourceId: string) =>
      (await deps.subscriptions.findSubscriptions([sourceId], "")).map((subscription) => subscription.listenerId),
  };
}

const STEPS = [{ namespace: "send", component_code: "step" }];
const hookedTrigger = (name = "feed") => ({ type: "source", props: { component_code: "hooked", name } });

/** The id of the source a workflow view's first trigger is. */
const firstTriggerId = (view: { triggers: unknown[] }) => (view.triggers[0] as { id: string }).id;

describe("a workflow's trigger source on AWS (a deadline and a deploy finisher)", () => {
  it("is handed to the finisher once the workflow is stored; the finisher runs its hooks, then subscribes the workflow", async () => {
    const t = await setUp();
    t.withFinisher();
    const deadline = t.timed();
    const created = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      deadline,
    );
    expect(t.deps.clock.nowMs()).toBeLessThanOrEqual(deadline.answerByMs);
    const sourceId = firstTriggerId(created);
    expect(created.triggers[0]).toMatchObject({
      owner_id: created.id,
      active: true,
      deploy_state: "deploying",
      deploy_step: "deploy",
    });
    // The route's documented answer has room for the trigger's deploy fields.
    expect(createRoute.response.safeParse({ data: created }).success).toBe(true);
    expect(t.ops).toEqual(["prepare hooked"]);
    expect(t.handedOver).toEqual([sourceId]);
    // Not yet subscribed: the workflow gets what the source emits once it is deployed.
    expect(await t.subscribers(sourceId)).toEqual([]);
    // The workflow's and the source's reads show the progress.
    expect((await getWorkflow(t.deps, t.caller, created.id)).triggers[0]).toMatchObject({ deploy_state: "deploying" });
    expect(await getSource(t.deps, t.caller, sourceId)).toMatchObject({
      deploy_state: "deploying",
      deploy_step: "deploy",
    });

    await t.finish();
    expect(t.ops).toEqual(["prepare hooked", "deploy hooked", "activate hooked"]);
    expect(t.timers).toEqual([`schedule ${sourceId}`]);
    expect(await t.subscribers(sourceId)).toEqual([created.id]);
    const stored = await t.deps.workflows.getWorkflow(created.id);
    const trigger = stored?.triggers[0];
    const subscription = (await t.deps.subscriptions.findSubscriptions([sourceId], ""))[0];
    expect(trigger?.type === "source" && trigger.subscriptionId).toBe(subscription?.id);
    const done = (await getWorkflow(t.deps, t.caller, created.id)).triggers[0];
    expect(done).toMatchObject({ id: sourceId, active: true });
    expect(done).not.toHaveProperty("deploy_state");
  });

  it("deploys an inactive workflow's trigger source inactive: deploy() only, no timer; PUT active hands activate() over", async () => {
    const t = await setUp();
    t.withFinisher();
    const created = await createWorkflow(t.deps, t.caller, { steps: STEPS, triggers: [hookedTrigger()] }, t.timed());
    const sourceId = firstTriggerId(created);
    expect(created.triggers[0]).toMatchObject({ active: false, deploy_state: "deploying", deploy_step: "deploy" });
    await t.finish();
    expect(t.ops).toEqual(["prepare hooked", "deploy hooked"]);
    expect(t.timers).toEqual([]);
    expect(await t.deps.sources.getSource(sourceId)).toMatchObject({ active: false });
    expect(await t.deps.sources.getSource(sourceId)).not.toHaveProperty("deployingSince");

    t.ops.length = 0;
    const deadline = t.timed();
    const activated = await updateWorkflow(t.deps, t.caller, created.id, { active: true }, deadline);
    expect(t.deps.clock.nowMs()).toBeLessThanOrEqual(deadline.answerByMs);
    expect(activated).toMatchObject({ active: true });
    expect(activated.triggers[0]).toMatchObject({ active: true, deploy_state: "deploying", deploy_step: "activate" });
    expect(t.ops).toEqual(["prepare hooked"]);
    await t.finish();
    expect(t.ops).toEqual(["prepare hooked", "activate hooked"]);
    expect(t.timers).toEqual([`schedule ${sourceId}`]);

    t.ops.length = 0;
    const deactivated = await updateWorkflow(t.deps, t.caller, created.id, { active: false }, t.timed());
    expect(deactivated.triggers[0]).toMatchObject({
      active: false,
      deploy_state: "deploying",
      deploy_step: "deactivate",
    });
    expect(t.ops).toEqual([]);
    await t.finish();
    expect(t.ops).toEqual(["deactivate hooked", "prepare hooked"]);
    expect(t.timers.at(-1)).toBe(`cancel ${sourceId}`);
    expect((await getWorkflow(t.deps, t.caller, created.id)).triggers[0]).not.toHaveProperty("deploy_state");
  });

  it("keeps every workflow PUT within the deadline: two trigger sources activated, each handed over", async () => {
    const t = await setUp();
    // Made locally (no deadline): both deployed inactive in the request.
    const created = await createWorkflow(t.deps, t.caller, {
      steps: STEPS,
      triggers: [hookedTrigger("a"), hookedTrigger("b")],
    });
    t.withFinisher();
    t.ops.length = 0;
    const deadline = t.timed();
    const activated = await updateWorkflow(t.deps, t.caller, created.id, { active: true }, deadline);
    expect(t.deps.clock.nowMs()).toBeLessThanOrEqual(deadline.answerByMs);
    expect(activated.triggers).toEqual([
      expect.objectContaining({ deploy_state: "deploying", deploy_step: "activate" }),
      expect.objectContaining({ deploy_state: "deploying", deploy_step: "activate" }),
    ]);
    expect(t.handedOver).toHaveLength(2);
    expect(t.ops.filter((op) => op.startsWith("activate"))).toEqual([]);
    await t.finish();
    expect(t.ops.filter((op) => op.startsWith("activate"))).toHaveLength(2);
  });

  it("answers 409 to a DELETE or a PUT that would touch a trigger source still deploying; a rename goes through", async () => {
    const t = await setUp();
    t.withFinisher();
    const created = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      t.timed(),
    );
    const sourceId = firstTriggerId(created);
    for (const attempt of [
      deleteWorkflow(t.deps, t.caller, created.id),
      updateWorkflow(t.deps, t.caller, created.id, { active: false }, t.timed()),
      updateWorkflow(t.deps, t.caller, created.id, { triggers: [{ type: "http" }] }, t.timed()),
    ]) {
      const refused = await rejection(attempt);
      expect(refused).toMatchObject({ code: "conflict" });
      expect(refused.message).toContain(`triggers[0]: its source ${sourceId} is still deploying`);
    }
    // Nothing was changed or deployed by the refused requests.
    expect((await t.sourcesLeft()).map((source) => source.id)).toEqual([sourceId]);
    expect(await t.deps.workflows.getWorkflow(created.id)).toMatchObject({ active: true });
    const renamed = await updateWorkflow(t.deps, t.caller, created.id, { settings: { name: "Renamed" } }, t.timed());
    expect(renamed).toMatchObject({ name: "Renamed" });

    await t.finish();
    t.ops.length = 0;
    // Deployed: the DELETE runs its deactivate() in the request, as DELETE /v1/sources/{id} does.
    await deleteWorkflow(t.deps, t.caller, created.id);
    expect(t.ops).toEqual(["deactivate hooked"]);
    expect(await t.sourcesLeft()).toEqual([]);
  });

  it("answers a repeated create (same external_id and body) with the workflow and its trigger still deploying", async () => {
    const t = await setUp();
    t.withFinisher();
    const body = { external_id: "wf-1", steps: STEPS, triggers: [hookedTrigger()] };
    const created = await createWorkflow(t.deps, t.caller, body, t.timed());
    const again = await createWorkflow(t.deps, t.caller, body, t.timed());
    expect(again.id).toBe(created.id);
    expect(again.triggers[0]).toMatchObject({ id: firstTriggerId(created), deploy_state: "deploying" });
    expect(await t.sourcesLeft()).toHaveLength(1);
    expect(t.handedOver).toHaveLength(1);
    // The same PUT as the create's body changes nothing either.
    const put = await updateWorkflow(t.deps, t.caller, created.id, body, t.timed());
    expect(put.triggers[0]).toMatchObject({ id: firstTriggerId(created), deploy_state: "deploying" });
  });
});

describe("a workflow's trigger source that fails or is interrupted", () => {
  it("shows a failure in the background on the workflow's trigger; the workflow stays, and a PUT of triggers deploys anew", async () => {
    const failing = new Set(["deploy hooked"]);
    const t = await setUp({ failing });
    t.withFinisher();
    const created = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      t.timed(),
    );
    const failedId = firstTriggerId(created);
    await t.finish();
    const shown = await getWorkflow(t.deps, t.caller, created.id);
    expect(shown).toMatchObject({ active: true });
    expect(updateRoute.response.safeParse({ data: shown }).success).toBe(true);
    expect(shown.triggers[0]).toMatchObject({
      id: failedId,
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the deploy hook failed: the third party said no"),
    });
    // Nothing of it runs: no subscription, no timer, no activate().
    expect(await t.subscribers(failedId)).toEqual([]);
    expect(t.ops).not.toContain("activate hooked");
    // Deactivating and activating the workflow pass it by.
    await updateWorkflow(t.deps, t.caller, created.id, { active: false }, t.timed());
    await updateWorkflow(t.deps, t.caller, created.id, { active: true }, t.timed());
    expect(t.ops.filter((op) => op !== "prepare hooked" && op !== "deploy hooked")).toEqual([]);

    // A PUT of the triggers deploys a new source and removes the failed one, without hooks.
    failing.clear();
    const replaced = await updateWorkflow(t.deps, t.caller, created.id, { triggers: [hookedTrigger()] }, t.timed());
    const newId = firstTriggerId(replaced);
    expect(newId).not.toBe(failedId);
    expect(await t.deps.sources.getSource(failedId)).toBeUndefined();
    await t.finish();
    expect(await t.subscribers(newId)).toEqual([created.id]);
    expect((await getWorkflow(t.deps, t.caller, created.id)).triggers[0]).toMatchObject({ id: newId, active: true });
    expect(t.ops).not.toContain("deactivate hooked");
  });

  it("leaves out a trigger whose failed source the sweep removed; DELETE of the workflow then works", async () => {
    const t = await setUp({ failing: new Set(["activate hooked"]) });
    t.withFinisher();
    const created = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      t.timed(),
    );
    await t.finish();
    expect((await getWorkflow(t.deps, t.caller, created.id)).triggers[0]).toMatchObject({ deploy_state: "failed" });
    // DELETE removes a failed one at once, without hooks.
    t.ops.length = 0;
    const other = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger("other")] },
      t.timed(),
    );
    await t.finish();
    t.ops.length = 0;
    await deleteWorkflow(t.deps, t.caller, other.id);
    expect(t.ops).toEqual([]);
    expect(await t.deps.sources.getSource(firstTriggerId(other))).toBeUndefined();

    t.deps.clock.set(t.deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS + 1);
    expect(await recoverInterruptedDeploys(t.deps, t.deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(1);
    expect((await getWorkflow(t.deps, t.caller, created.id)).triggers).toEqual([]);
    await deleteWorkflow(t.deps, t.caller, created.id);
    expect(await t.deps.workflows.getWorkflow(created.id)).toBeUndefined();
    expect(t.ops).toEqual([]);
  });

  it("removes the trigger sources, without hooks and never handed over, when the workflow cannot be made", async () => {
    const t = await setUp();
    t.withFinisher();
    t.deps.host.prepareWorkflow = async () => {
      throw invalid("steps[0].component_code", "the deployment could not be built");
    };
    const refused = await rejection(
      createWorkflow(
        t.deps,
        t.caller,
        { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
        t.timed(),
      ),
    );
    expect(refused.message).toContain("the deployment could not be built");
    expect(await t.sourcesLeft()).toEqual([]);
    expect(t.handedOver).toEqual([]);
    expect(t.ops).toEqual(["prepare hooked"]);
  });

  it("shows a hand-over the finisher refused as a failed trigger, and answers the workflow", async () => {
    const t = await setUp({ finisherFails: true });
    t.withFinisher();
    const created = await createWorkflow(t.deps, t.caller, { steps: STEPS, triggers: [hookedTrigger()] }, t.timed());
    const shown = await getWorkflow(t.deps, t.caller, created.id);
    expect(shown.triggers[0]).toMatchObject({ deploy_state: "failed" });
    expect(await t.deps.sources.getSource(firstTriggerId(created))).toMatchObject({
      deployError: expect.stringContaining("internal error"),
    });
  });

  it("leaves nothing once the sweep ran when the request is killed before the workflow is stored", async () => {
    const t = await setUp({ hangAt: "store" });
    t.withFinisher();
    void createWorkflow(t.deps, t.caller, { steps: STEPS, triggers: [hookedTrigger()] }, t.timed());
    await t.reached;
    const [marked] = await t.sourcesLeft();
    expect(marked).toMatchObject({ deployStep: "deploy" });
    expect(t.handedOver).toEqual([]);
    t.deps.clock.set(t.deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS + 1);
    expect(await recoverInterruptedDeploys(t.deps, t.deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(1);
    expect(await t.sourcesLeft()).toEqual([]);
    expect((await t.deps.workflows.listWorkflowsOfUser(t.caller.userId, { limit: 10 })).items).toEqual([]);
  });

  it("leaves the workflow without the trigger once the sweep ran when killed at the hand-over", async () => {
    const t = await setUp({ hangAt: "hand-over" });
    t.withFinisher();
    void createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      t.timed(),
    );
    await t.reached;
    const [workflow] = (await t.deps.workflows.listWorkflowsOfUser(t.caller.userId, { limit: 10 })).items;
    expect(workflow).toBeDefined();
    const view = await getWorkflow(t.deps, t.caller, workflow?.id ?? "");
    expect(view.triggers[0]).toMatchObject({ deploy_state: "deploying", deploy_step: "deploy" });
    t.deps.clock.set(t.deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS + 1);
    expect(await recoverInterruptedDeploys(t.deps, t.deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(1);
    expect(await t.sourcesLeft()).toEqual([]);
    expect((await getWorkflow(t.deps, t.caller, workflow?.id ?? "")).triggers).toEqual([]);
    await deleteWorkflow(t.deps, t.caller, workflow?.id ?? "");
  });

  it("leaves no subscription behind when the finisher is killed in activate(); the sweep removes the source", async () => {
    const t = await setUp({ hangAt: "activate" });
    t.withFinisher();
    const created = await createWorkflow(
      t.deps,
      t.caller,
      { settings: { auto_deploy: true }, steps: STEPS, triggers: [hookedTrigger()] },
      t.timed(),
    );
    const sourceId = firstTriggerId(created);
    void finishDeploy(t.deps, sourceId, t.deps.clock.nowMs() + 120_000);
    await t.reached;
    expect(await getSource(t.deps, t.caller, sourceId)).toMatchObject({ deploy_step: "activate" });
    expect(await t.subscribers(sourceId)).toEqual([]);
    t.deps.clock.set(t.deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS + 1);
    expect(await recoverInterruptedDeploys(t.deps, t.deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(1);
    expect(await t.deps.sources.getSource(sourceId)).toBeUndefined();
    expect(await t.subscribers(sourceId)).toEqual([]);
    expect(t.timers).toEqual([`cancel ${sourceId}`]);
  });
});

describe("a workflow's trigger sources in races and retries (AWS)", () => {
  it("makes one workflow of two creates with one external_id at once; the other's source is removed, never handed over", async () => {
    const t = await setUp();
    t.withFinisher();
    const body = { external_id: "wf-race", steps: STEPS, triggers: [hookedTrigger()] };
    const [first, second] = await Promise.all([
      createWorkflow(t.deps, t.caller, body, t.timed()),
      createWorkflow(t.deps, t.caller, body, t.timed()),
    ]);
    expect(second.id).toBe(first.id);
    const left = await t.sourcesLeft();
    expect(left.map((source) => source.id)).toEqual([firstTriggerId(first)]);
    expect(t.handedOver).toEqual([firstTriggerId(first)]);
    // The loser's source ran no hook: it never got past its function.
    expect(t.ops.filter((op) => !op.startsWith("prepare"))).toEqual([]);
  });

  it("activates again, on PUT active: true, a trigger source whose activation failed in the background", async () => {
    const failing = new Set(["activate hooked"]);
    const t = await setUp({ failing });
    const created = await createWorkflow(t.deps, t.caller, { steps: STEPS, triggers: [hookedTrigger()] });
    const sourceId = firstTriggerId(created);
    t.withFinisher();
    await updateWorkflow(t.deps, t.caller, created.id, { active: true }, t.timed());
    await t.finish();
    const failed = await getWorkflow(t.deps, t.caller, created.id);
    expect(failed).toMatchObject({ active: true });
    expect(failed.triggers[0]).toMatchObject({
      active: false,
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the activate hook failed"),
    });
    failing.clear();
    const again = await updateWorkflow(t.deps, t.caller, created.id, { active: true }, t.timed());
    expect(again.triggers[0]).toMatchObject({ deploy_state: "deploying", deploy_step: "activate" });
    await t.finish();
    const healed = (await getWorkflow(t.deps, t.caller, created.id)).triggers[0];
    expect(healed).toMatchObject({ id: sourceId, active: true });
    expect(healed).not.toHaveProperty("deploy_state");
    expect(t.timers.at(-1)).toBe(`schedule ${sourceId}`);
  });
});

describe("a workflow's trigger source in local mode (no deadline, no finisher)", () => {
  it("is deployed whole in the request and subscribed before the workflow is answered; an inactive one runs no activate()", async () => {
    const t = await setUp();
    const active = await createWorkflow(t.deps, t.caller, {
      settings: { auto_deploy: true },
      steps: STEPS,
      triggers: [hookedTrigger("a")],
    });
    expect(active.triggers[0]).not.toHaveProperty("deploy_state");
    expect(t.ops).toEqual(["prepare hooked", "deploy hooked", "activate hooked"]);
    expect(await t.subscribers(firstTriggerId(active))).toEqual([active.id]);
    t.ops.length = 0;
    const inactive = await createWorkflow(t.deps, t.caller, { steps: STEPS, triggers: [hookedTrigger("b")] });
    expect(t.ops).toEqual(["prepare hooked", "deploy hooked"]);
    expect(inactive.triggers[0]).toMatchObject({ active: false });
    expect(await t.subscribers(firstTriggerId(inactive))).toEqual([inactive.id]);
  });
});

describe("a workflow's trigger sources deleted on AWS (DELETE, or a PUT of triggers that drops them)", () => {
  it("hands each source's deactivate() to the finisher on DELETE: the workflow is gone at once, the sources once it ran", async () => {
    const t = await setUp();
    const created = await createWorkflow(t.deps, t.caller, {
      settings: { auto_deploy: true },
      steps: STEPS,
      triggers: [hookedTrigger("a"), hookedTrigger("b")],
    });
    const ids = created.triggers.map((trigger) => (trigger as { id: string }).id);
    t.withFinisher();
    t.ops.length = 0;
    t.timers.length = 0;
    const deadline = t.timed();
    expect(await deleteWorkflow(t.deps, t.caller, created.id, deadline)).toEqual({ id: created.id, deleted: true });
    expect(t.deps.clock.nowMs()).toBeLessThanOrEqual(deadline.answerByMs);
    expect(t.ops).toEqual([]);
    expect(t.handedOver).toEqual(ids);
    expect(await t.deps.workflows.getWorkflow(created.id)).toBeUndefined();
    for (const id of ids) {
      expect(await getSource(t.deps, t.caller, id)).toMatchObject({ active: false, deploy_state: "deleting" });
      expect(t.timers).toContain(`cancel ${id}`);
    }
    await t.finish();
    expect(t.ops).toEqual(["deactivate hooked", "deactivate hooked"]);
    expect(await t.sourcesLeft()).toEqual([]);
  });

  it("hands the deactivate() of a source a PUT of triggers drops to the finisher, and deploys the new one", async () => {
    const t = await setUp();
    const created = await createWorkflow(t.deps, t.caller, {
      settings: { auto_deploy: true },
      steps: STEPS,
      triggers: [hookedTrigger("a")],
    });
    const dropped = firstTriggerId(created);
    t.withFinisher();
    t.ops.length = 0;
    const put = await updateWorkflow(t.deps, t.caller, created.id, { triggers: [{ type: "http" }] }, t.timed());
    expect(put.triggers).toHaveLength(1);
    expect(t.ops).toEqual([]);
    expect(t.handedOver).toEqual([dropped]);
    expect(await getSource(t.deps, t.caller, dropped)).toMatchObject({ deploy_state: "deleting" });
    // The workflow is settled: its other changes go through while the source is deleted.
    await updateWorkflow(t.deps, t.caller, created.id, { active: false }, t.timed());
    await t.finish();
    expect(t.ops).toEqual(["deactivate hooked"]);
    expect(await t.sourcesLeft()).toEqual([]);
  });
});
