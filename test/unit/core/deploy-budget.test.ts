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
import { ANSWER_MARGIN_MS, API_GATEWAY_LIMIT_MS, answerDeadline } from "#http/answer-deadline";
import { createDeployFinisherHandler } from "#internal/deploy-finisher";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

/**
 * A deploy spends the time its request has (issue 16, docs/aws.md "Deploy time budget"): the steps
 * after the save that do not fit are handed to the deploy finisher, which goes on from there.
 */

const HOOKED: Partial<ComponentDescription> = {
  hooks: ["deploy", "activate"],
  props: [{ name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } }],
};

/** Time the scripted steps take on the test's clock. */
const PREPARE_MS = 3_000;
const HOOK_MS = 1_000;

async function setUp(options: { prepare?: "ready" | "pending"; failHook?: "deploy" | "activate" } = {}) {
  const handedOver: string[] = [];
  const removed: string[] = [];
  const timers: string[] = [];
  let deps: Deps & { clock: { nowMs(): number; set(ms: number): void } };
  const { host, calls } = scriptedHost(HOOKED, async (invocation) => {
    deps.clock.set(deps.clock.nowMs() + HOOK_MS);
    if (invocation.kind === options.failHook) {
      return { error: { name: "Error", message: "the third party said no", ts: deps.clock.nowMs() } };
    }
    return {};
  });
  const prepares: (number | undefined)[] = [];
  deps = memoryDeps(Date.UTC(2026, 10, 26, 12), {
    host: {
      ...host,
      prepare: async (_code, prepareOptions) => {
        prepares.push(prepareOptions?.readyByMs);
        deps.clock.set(deps.clock.nowMs() + PREPARE_MS);
        return options.prepare === "pending" ? "pending" : undefined;
      },
      remove: async (code) => void removed.push(code.sourceId),
    },
    timers: {
      schedule: async (target) => void timers.push(`schedule ${timerTargetId(target)}`),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
  });
  deps.deployFinisher = { finishLater: async (sourceId) => void handedOver.push(sourceId) };
  const account = await accountIn(deps, "budgeted");
  const caller = { userId: account.user.id };
  const hooksRun = () => calls.map((call) => call.kind);
  return { deps, caller, handedOver, removed, timers, prepares, hooksRun };
}

describe("a deploy within its request's time", () => {
  it("runs every step in the request when each fits", async () => {
    const { deps, caller, handedOver, hooksRun, timers } = await setUp();
    const answerByMs = deps.clock.nowMs() + 60_000;
    const source = await deploySource(deps, caller, { component_code: "code" }, { answerByMs });
    expect(source.deploy_state).toBeUndefined();
    expect(hooksRun()).toEqual(["deploy", "activate"]);
    expect(handedOver).toEqual([]);
    expect(timers).toEqual([`schedule ${source.id}`]);
  });

  it("answers the source still deploying when a hook's whole limit does not fit, and the finisher deploys it", async () => {
    const { deps, caller, handedOver, hooksRun, timers, prepares } = await setUp();
    const limit = deps.runtime.invocationTimeoutMs;
    // Room for the function (the prepare budget), not for it and a whole hook after it.
    const answerByMs = deps.clock.nowMs() + PREPARE_MS + limit - 1;
    const source = await deploySource(deps, caller, { component_code: "code" }, { answerByMs });
    expect(deps.clock.nowMs()).toBeLessThanOrEqual(answerByMs);
    expect(prepares).toEqual([answerByMs]);
    expect(source).toMatchObject({ deploy_state: "deploying", deploy_step: "deploy" });
    expect(hooksRun()).toEqual([]);
    expect(handedOver).toEqual([source.id]);
    expect(timers).toEqual([]);
    // Its reads show where it is; an update waits for it.
    expect(await getSource(deps, caller, source.id)).toMatchObject({
      deploy_state: "deploying",
      deploy_step: "deploy",
    });
    await expect(updateSource(deps, caller, source.id, { active: false })).rejects.toMatchObject({ code: "conflict" });

    // The finisher (Lambda's asynchronous invoke) goes on from the hooks, with their whole limits.
    const handler = createDeployFinisherHandler(async () => deps);
    await handler({ sourceId: source.id }, { getRemainingTimeInMillis: () => 120_000 });
    expect(hooksRun()).toEqual(["deploy", "activate"]);
    expect(prepares).toHaveLength(1);
    expect(timers).toEqual([`schedule ${source.id}`]);
    const deployed = await getSource(deps, caller, source.id);
    expect(deployed.deploy_state).toBeUndefined();
    expect(deployed).not.toHaveProperty("deploy_step");
    // A second delivery of the same job (Lambda delivers at least once) finds nothing to do.
    expect(await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000)).toBe("skipped");
    expect(hooksRun()).toEqual(["deploy", "activate"]);
  });

  it("hands over from the function when even that does not fit", async () => {
    const { deps, caller, handedOver, prepares, hooksRun } = await setUp();
    const answerByMs = deps.clock.nowMs() + PREPARE_BUDGET_MS - 1;
    const source = await deploySource(deps, caller, { component_code: "code" }, { answerByMs });
    expect(source).toMatchObject({ deploy_state: "deploying", deploy_step: "prepare" });
    expect(prepares).toEqual([]);
    expect(handedOver).toEqual([source.id]);
    expect(await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000)).toBe("deployed");
    // The finisher waits for its function as long as the host does (no readyBy).
    expect(prepares).toEqual([undefined]);
    expect(hooksRun()).toEqual(["deploy", "activate"]);
  });

  it("hands over a function that is made but not ready by the deadline, and the finisher prepares it again", async () => {
    const { deps, caller, handedOver, prepares } = await setUp({ prepare: "pending" });
    const source = await deploySource(
      deps,
      caller,
      { component_code: "code" },
      { answerByMs: deps.clock.nowMs() + 60_000 },
    );
    expect(source).toMatchObject({ deploy_state: "deploying", deploy_step: "prepare" });
    expect(handedOver).toEqual([source.id]);
    expect(prepares).toHaveLength(1);
  });

  it("runs every step in the request without a deadline or without a finisher (local mode)", async () => {
    const { deps, caller, hooksRun, handedOver } = await setUp();
    expect((await deploySource(deps, caller, { component_code: "code" })).deploy_state).toBeUndefined();
    delete deps.deployFinisher;
    const tight = { answerByMs: deps.clock.nowMs() + 1 };
    expect((await deploySource(deps, caller, { component_code: "code" }, tight)).deploy_state).toBeUndefined();
    expect(hooksRun()).toEqual(["deploy", "activate", "deploy", "activate"]);
    expect(handedOver).toEqual([]);
  });
});

describe("a deploy finished in the background", () => {
  async function handedOver(failHook?: "deploy" | "activate") {
    const context = await setUp(failHook ? { failHook } : {});
    const { deps, caller } = context;
    const answerByMs = deps.clock.nowMs() + PREPARE_BUDGET_MS + 1;
    const source = await deploySource(deps, caller, { component_code: "code" }, { answerByMs, idempotencyKey: "k-1" });
    expect(source).toMatchObject({ deploy_step: "deploy" });
    return { ...context, source };
  }

  it("keeps a failure on the source: its reads say why, what it made is removed, until it is deleted", async () => {
    const { deps, caller, source, removed, timers, hooksRun } = await handedOver("activate");
    expect(await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000)).toBe("failed");
    expect(hooksRun()).toEqual(["deploy", "activate"]);
    const failed = await getSource(deps, caller, source.id);
    expect(failed).toMatchObject({
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the activate hook failed: the third party said no"),
    });
    expect(failed).not.toHaveProperty("deploy_step");
    expect(removed).toEqual([source.id]);
    expect(timers).toEqual([`cancel ${source.id}`]);
    await expect(updateSource(deps, caller, source.id, { active: true })).rejects.toMatchObject({
      code: "conflict",
      message: expect.stringContaining("failed to deploy"),
    });
    // The finisher does not take it up again.
    expect(await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000)).toBe("skipped");
    await deleteSource(deps, caller, source.id);
    expect(await deps.sources.getSource(source.id)).toBeUndefined();
  });

  it("lets a retry with the same Idempotency-Key deploy afresh after a failure", async () => {
    const { deps, caller, source, hooksRun } = await handedOver("deploy");
    expect(await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000)).toBe("failed");
    // It deploys again, in the request this time (and the hook still says no): not a 409 about a dead deploy.
    await expect(
      deploySource(
        deps,
        caller,
        { component_code: "code" },
        { idempotencyKey: "k-1", answerByMs: deps.clock.nowMs() + 120_000 },
      ),
    ).rejects.toMatchObject({ message: expect.stringContaining("the deploy hook failed") });
    expect(hooksRun()).toEqual(["deploy", "deploy"]);
    expect(await deps.sources.getSource(source.id)).toBeUndefined();
  });

  it("is removed by the recovery sweep once failed past the bound, as any unfinished deploy", async () => {
    const { deps, source } = await handedOver("deploy");
    await finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000);
    expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(0);
    deps.clock.set(deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS);
    expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS)).toBe(1);
    expect(await deps.sources.getSource(source.id)).toBeUndefined();
  });

  it("leaves a deploy to the sweep when the finisher could still run once the sweep may take it", async () => {
    const { deps, caller, source, hooksRun } = await handedOver();
    const began = (await deps.sources.getSource(source.id))!.deployingSince!;
    expect(await finishDeploy(deps, source.id, began + DEPLOY_ABANDONED_AFTER_MS + 1)).toBe("skipped");
    expect(hooksRun()).toEqual([]);
    expect((await getSource(deps, caller, source.id)).deploy_state).toBe("deploying");
  });

  it("runs the hooks once when two finishers get the same job at once", async () => {
    const { deps, source, hooksRun } = await handedOver();
    const outcomes = await Promise.all([
      finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000),
      finishDeploy(deps, source.id, deps.clock.nowMs() + 120_000),
    ]);
    expect(outcomes.sort()).toEqual(["deployed", "skipped"]);
    expect(hooksRun()).toEqual(["deploy", "activate"]);
  });
});

describe("answerDeadline", () => {
  const now = 1_000_000;
  it("is the function's end less the margin when API Gateway leaves more", () => {
    expect(answerDeadline(now, 10_000, now)).toBe(now + 10_000 - ANSWER_MARGIN_MS);
  });
  it("is API Gateway's end less the margin when the request waited (a cold start) before the function ran", () => {
    const received = now - 5_000;
    expect(answerDeadline(now, 30_000, received)).toBe(received + API_GATEWAY_LIMIT_MS - ANSWER_MARGIN_MS);
  });
  it("is none without Lambda's context (local mode)", () => {
    expect(answerDeadline(now, undefined, now)).toBeUndefined();
  });
});
