import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import type { Deps } from "#core/ports/deps";
import { timerTargetId } from "#core/ports/timers";
import {
  DEPLOY_ABANDONED_AFTER_MS,
  deleteSource,
  deploySource,
  finishDeploy,
  getSource,
  PREPARE_BUDGET_MS,
  recoverInterruptedDeploys,
  updateSource,
} from "#core/sources";
import { route as updateRoute } from "#http/update-source";
import { failedHook, killPoint, never, runHandedOver } from "../../support/deploy-kill-points.ts";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

/**
 * `PUT /v1/sources/{id}` within its request's time (issue 16, docs/aws.md "Deploy time budget"):
 * the steps that fit run in the request, the first that does not goes to the deploy finisher; a
 * failure or an interruption at any step leaves the source whole (docs/components.md "Deploys in
 * progress").
 */

/** Every version of the component has the three hooks, a timer and a plain prop. */
const DESCRIPTION: Partial<ComponentDescription> = {
  hooks: ["deploy", "activate", "deactivate"],
  props: [
    { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } },
    { name: "label", type: "string" },
  ],
};

/** Time the scripted steps take on the test's clock. */
const PREPARE_MS = 3_000;
const HOOK_MS = 1_000;

type Step = "deactivate" | "prepare" | "activate" | "timer" | "final write";

interface Options {
  /** A hook that fails: `<kind> <code>`, as long as it is in the set. */
  failing?: Set<string>;
  /** Hangs (the process killed there) the first time the update reaches it, once `armed`. */
  hangAt?: Step;
}

async function setUp(options: Options = {}) {
  const failing = options.failing ?? new Set<string>();
  /** What the host did, in order: `prepare <code>`, `<hook> <code> <label>`. */
  const ops: string[] = [];
  const timers: string[] = [];
  const handedOver: string[] = [];
  const { hangs, reached, arm } = killPoint<Step>(options.hangAt, true);
  let deps: Deps & { clock: { nowMs(): number; set(ms: number): void } };
  const { host } = scriptedHost(DESCRIPTION);
  deps = memoryDeps(Date.UTC(2026, 10, 27, 0), {
    host: {
      ...host,
      describe: async (code) => ({ ...(await host.describe(code)), name: code }),
      prepare: async (code) => {
        if (hangs("prepare")) return never();
        ops.push(`prepare ${code.code}`);
        deps.clock.set(deps.clock.nowMs() + PREPARE_MS);
      },
      invoke: async (code, invocation, handlers) => {
        const op = `${invocation.kind} ${code.code} ${String(invocation.props.label)}`;
        if (hangs(invocation.kind as Step)) return never();
        ops.push(op);
        deps.clock.set(deps.clock.nowMs() + HOOK_MS);
        if (failing.has(`${invocation.kind} ${code.code}`)) {
          return failedHook(invocation.invocationId, deps.clock.nowMs());
        }
        return host.invoke(code, invocation, handlers);
      },
    },
    timers: {
      schedule: async (target) => (hangs("timer") ? never() : void timers.push(`schedule ${timerTargetId(target)}`)),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
  });
  const sources = deps.sources;
  const update = sources.updateSource.bind(sources);
  sources.updateSource = async (source) =>
    source.deployingSince === undefined && hangs("final write") ? never() : update(source);
  const account = await accountIn(deps, "updater");
  const caller = { userId: account.user.id };
  const made = await deploySource(deps, caller, { component_code: "v1", configured_props: { label: "old" } });
  ops.length = 0;
  timers.length = 0;
  return {
    deps,
    caller,
    made,
    ops,
    timers,
    handedOver,
    reached,
    /** From now on the update hangs at `hangAt`. */
    arm,
    /** Gives the deps a deploy finisher that records its jobs (AWS). */
    withFinisher: () => {
      deps.deployFinisher = { finishLater: async (id) => void handedOver.push(id) };
    },
  };
}

const NEW_CODE = { component_code: "v2", configured_props: { label: "new" } };

describe("an update in local mode (no deadline)", () => {
  it("runs the previous code's deactivate() before the new code is built, then the new activate() and timer", async () => {
    const { deps, caller, made, ops, timers } = await setUp();
    const updated = await updateSource(deps, caller, made.id, NEW_CODE);
    // On AWS the function is the source's one function: built first, deactivate() ran the new code.
    expect(ops).toEqual(["deactivate v1 old", "prepare v2", "activate v2 new"]);
    expect(timers).toEqual([`cancel ${made.id}`, `schedule ${made.id}`]);
    expect(updated).not.toHaveProperty("deploy_state");
    expect(updated.configured_props).toMatchObject({ label: "new" });
    const stored = await deps.sources.getSource(made.id);
    expect(stored).not.toHaveProperty("deployingSince");
    expect(stored).not.toHaveProperty("updateFrom");
  });

  it("keeps the previous settings, timer running, when deactivate() fails (400)", async () => {
    const { deps, caller, made, ops, timers } = await setUp({ failing: new Set(["deactivate v1"]) });
    await expect(updateSource(deps, caller, made.id, NEW_CODE)).rejects.toMatchObject({
      code: "validation",
      message: expect.stringContaining("the deactivate hook failed"),
    });
    expect(ops).toEqual(["deactivate v1 old"]);
    // Stopped for the hook, started again when it failed.
    expect(timers).toEqual([`cancel ${made.id}`, `schedule ${made.id}`]);
    const source = await getSource(deps, caller, made.id);
    expect(source).toMatchObject({ component_id: made.component_id, active: true, configured_props: { label: "old" } });
    expect(source).not.toHaveProperty("deploy_state");
  });

  it("leaves the new settings inactive, with deploy_error, when activate() fails; PUT active: true tries again", async () => {
    const failing = new Set(["activate v2"]);
    const { deps, caller, made, ops, timers } = await setUp({ failing });
    await expect(updateSource(deps, caller, made.id, NEW_CODE)).rejects.toThrow("the activate hook failed");
    expect(timers).toEqual([`cancel ${made.id}`, `cancel ${made.id}`]);
    const failed = await getSource(deps, caller, made.id);
    expect(failed).toMatchObject({
      active: false,
      configured_props: { label: "new" },
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the activate hook failed: the third party said no"),
    });
    expect(failed.component_id).not.toBe(made.component_id);
    failing.clear();
    ops.length = 0;
    const again = await updateSource(deps, caller, made.id, { active: true });
    // Inactive, so no deactivate(): the new code is built again and activated.
    expect(ops).toEqual(["prepare v2", "activate v2 new"]);
    expect(again).toMatchObject({ active: true });
    expect(again).not.toHaveProperty("deploy_state");
    expect(timers.at(-1)).toBe(`schedule ${made.id}`);
  });

  it("answers 409 to a second PUT while an update runs, and to one of two PUTs at once", async () => {
    const { deps, caller, made, arm, reached } = await setUp({ hangAt: "activate" });
    arm();
    void updateSource(deps, caller, made.id, NEW_CODE);
    await reached;
    expect(await getSource(deps, caller, made.id)).toMatchObject({ deploy_state: "deploying" });
    await expect(updateSource(deps, caller, made.id, { active: false })).rejects.toMatchObject({
      code: "conflict",
      message: expect.stringContaining("is still being updated"),
    });
  });

  it("lets exactly one of two PUTs that checked the same record save", async () => {
    const { deps, caller, made } = await setUp();
    const results = await Promise.allSettled([
      updateSource(deps, caller, made.id, { name: "first" }),
      updateSource(deps, caller, made.id, { name: "second" }),
    ]);
    expect(results.map((result) => result.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect((results.find((result) => result.status === "rejected") as PromiseRejectedResult).reason).toMatchObject({
      code: "conflict",
    });
  });
});

describe("an update interrupted at any step", () => {
  const points: Step[] = ["deactivate", "prepare", "activate", "timer", "final write"];
  for (const point of points) {
    it(`leaves the source whole once the sweep ran, when killed at: ${point}`, async () => {
      const { deps, caller, made, arm, reached, timers } = await setUp({ hangAt: point });
      arm();
      void updateSource(deps, caller, made.id, NEW_CODE);
      await reached;
      expect(await getSource(deps, caller, made.id)).toMatchObject({ deploy_state: "deploying" });

      // A bound before the update began leaves it; the restart's sweep stops it.
      expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(0);
      deps.clock.set(deps.clock.nowMs() + 1);
      expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs())).toBe(1);
      // Not removed: the new settings, inactive, no timer, and a reason.
      const stopped = await getSource(deps, caller, made.id);
      expect(stopped).toMatchObject({
        active: false,
        configured_props: { label: "new" },
        deploy_state: "failed",
        deploy_error: expect.stringContaining("interrupted"),
      });
      expect(timers.at(-1)).toBe(`cancel ${made.id}`);
      expect(await deps.sources.listActiveTimerSources()).toEqual([]);
      // Swept once: it is no longer marked.
      expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS)).toBe(0);

      // The user's next PUT brings it back, new code built and activated.
      const back = await updateSource(deps, caller, made.id, { active: true });
      expect(back).toMatchObject({ active: true, configured_props: { label: "new" } });
      expect(back).not.toHaveProperty("deploy_state");
      expect(timers.at(-1)).toBe(`schedule ${made.id}`);
    });
  }

  it("keeps a create's Idempotency-Key answering the source while it is updated, past the bound too", async () => {
    const { deps, caller, arm, reached } = await setUp({ hangAt: "activate" });
    const body = { component_code: "v1", configured_props: { label: "old" } };
    const keyed = await deploySource(deps, caller, body, { idempotencyKey: "k-put" });
    arm();
    void updateSource(deps, caller, keyed.id, NEW_CODE);
    await reached;
    deps.clock.set(deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS + 1);
    const again = await deploySource(deps, caller, body, { idempotencyKey: "k-put" });
    expect(again.id).toBe(keyed.id);
    expect(await deps.sources.getSource(keyed.id)).toBeDefined();
  });

  it("lets DELETE remove a source whose update was interrupted", async () => {
    const { deps, caller, made, arm, reached } = await setUp({ hangAt: "prepare" });
    arm();
    void updateSource(deps, caller, made.id, NEW_CODE);
    await reached;
    await deleteSource(deps, caller, made.id);
    expect(await deps.sources.getSource(made.id)).toBeUndefined();
    expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() + 1)).toBe(0);
  });
});

describe("an update within its request's time (AWS)", () => {
  it("runs every step in the request when each fits", async () => {
    const { deps, caller, made, ops, handedOver, withFinisher } = await setUp();
    withFinisher();
    const updated = await updateSource(deps, caller, made.id, NEW_CODE, { answerByMs: deps.clock.nowMs() + 120_000 });
    expect(updated).not.toHaveProperty("deploy_state");
    expect(ops).toEqual(["deactivate v1 old", "prepare v2", "activate v2 new"]);
    expect(handedOver).toEqual([]);
  });

  it("answers deploying when deactivate() does not fit, and the finisher runs the update with the right code and props", async () => {
    const { deps, caller, made, ops, timers, handedOver, withFinisher } = await setUp();
    withFinisher();
    const answerByMs = deps.clock.nowMs() + deps.runtime.invocationTimeoutMs - 1;
    const answered = await updateSource(deps, caller, made.id, NEW_CODE, { answerByMs });
    expect(deps.clock.nowMs()).toBeLessThanOrEqual(answerByMs);
    expect(answered).toMatchObject({ deploy_state: "deploying", deploy_step: "deactivate" });
    // The route's documented answer has room for the update's step.
    expect(updateRoute.response.safeParse({ data: answered }).success).toBe(true);
    expect(handedOver).toEqual([made.id]);
    expect(ops).toEqual([]);
    // The previous timer stops in the request: it must not fire on settings half swapped.
    expect(timers).toEqual([`cancel ${made.id}`]);
    await expect(updateSource(deps, caller, made.id, { active: false })).rejects.toMatchObject({ code: "conflict" });

    await runHandedOver(deps, [made.id]);
    expect(ops).toEqual(["deactivate v1 old", "prepare v2", "activate v2 new"]);
    expect(timers.at(-1)).toBe(`schedule ${made.id}`);
    const done = await getSource(deps, caller, made.id);
    expect(done).toMatchObject({ active: true, configured_props: { label: "new" } });
    expect(done).not.toHaveProperty("deploy_state");
    expect(await deps.sources.getSource(made.id)).not.toHaveProperty("updateFrom");
    // A second delivery of the job does nothing.
    expect(await finishDeploy(deps, made.id, deps.clock.nowMs() + 120_000)).toBe("skipped");
    expect(ops).toHaveLength(3);
  });

  it("hands over from the function when it does not fit, with no hook to run before it", async () => {
    const { deps, caller, made, ops, handedOver, withFinisher } = await setUp();
    withFinisher();
    // Inactive first (in the request: a generous deadline), so the next PUT has no deactivate().
    await updateSource(deps, caller, made.id, { active: false }, { answerByMs: deps.clock.nowMs() + 120_000 });
    ops.length = 0;
    const answerByMs = deps.clock.nowMs() + PREPARE_BUDGET_MS - 1;
    const answered = await updateSource(deps, caller, made.id, { ...NEW_CODE, active: false }, { answerByMs });
    expect(answered).toMatchObject({ deploy_state: "deploying", deploy_step: "prepare" });
    expect(ops).toEqual([]);
    expect(handedOver).toEqual([made.id]);
    expect(await finishDeploy(deps, made.id, deps.clock.nowMs() + 120_000)).toBe("deployed");
    expect(ops).toEqual(["prepare v2"]);
    expect(await getSource(deps, caller, made.id)).toMatchObject({ active: false, configured_props: { label: "new" } });
  });

  it("shows a failed deactivate() in the background on the source, with the previous settings in force", async () => {
    const { deps, caller, made, timers, withFinisher } = await setUp({ failing: new Set(["deactivate v1"]) });
    withFinisher();
    await updateSource(deps, caller, made.id, NEW_CODE, { answerByMs: deps.clock.nowMs() + 1 });
    expect(await finishDeploy(deps, made.id, deps.clock.nowMs() + 120_000)).toBe("failed");
    const kept = await getSource(deps, caller, made.id);
    expect(kept).toMatchObject({
      active: true,
      component_id: made.component_id,
      configured_props: { label: "old" },
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the previous settings stay: the deactivate hook failed"),
    });
    // Stopped by the request (and again by the finisher), started again with the previous settings.
    expect(timers.at(-1)).toBe(`schedule ${made.id}`);
    // Not marked: the sweep leaves it; a PUT may go on from it.
    expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS)).toBe(0);
    await expect(updateSource(deps, caller, made.id, { name: "renamed", active: false })).rejects.toThrow(
      "the deactivate hook failed",
    );
  });

  it("shows a failed activate() in the background on the source, left inactive with the new settings", async () => {
    const { deps, caller, made, timers, withFinisher } = await setUp({ failing: new Set(["activate v2"]) });
    withFinisher();
    await updateSource(deps, caller, made.id, NEW_CODE, { answerByMs: deps.clock.nowMs() + 1 });
    expect(await finishDeploy(deps, made.id, deps.clock.nowMs() + 120_000)).toBe("failed");
    expect(await getSource(deps, caller, made.id)).toMatchObject({
      active: false,
      configured_props: { label: "new" },
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the activate hook failed"),
    });
    expect(timers.at(-1)).toBe(`cancel ${made.id}`);
  });

  it("is stopped by the sweep when the finisher is killed after the function was updated", async () => {
    const { deps, caller, made, ops, withFinisher, arm, reached } = await setUp({ hangAt: "activate" });
    withFinisher();
    await updateSource(deps, caller, made.id, NEW_CODE, { answerByMs: deps.clock.nowMs() + 1 });
    arm();
    void finishDeploy(deps, made.id, deps.clock.nowMs() + 120_000);
    await reached;
    expect(ops).toEqual(["deactivate v1 old", "prepare v2"]);
    expect(await getSource(deps, caller, made.id)).toMatchObject({
      deploy_state: "deploying",
      deploy_step: "activate",
    });
    const began = (await deps.sources.getSource(made.id))!.deployingSince!;
    expect(await recoverInterruptedDeploys(deps, began)).toBe(0);
    expect(await recoverInterruptedDeploys(deps, began + 1)).toBe(1);
    expect(await getSource(deps, caller, made.id)).toMatchObject({
      active: false,
      deploy_state: "failed",
      deploy_error: expect.stringContaining("interrupted at activate"),
    });
  });
});
