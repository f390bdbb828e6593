import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import type { Deps } from "#core/ports/deps";
import { timerTargetId } from "#core/ports/timers";
import { fireTimer } from "#core/source-runs";
import {
  DEPLOY_ABANDONED_AFTER_MS,
  deleteSource,
  deploySource,
  finishDeploy,
  getSource,
  recoverInterruptedDeploys,
  updateSource,
} from "#core/sources";
import { route as getRoute } from "#http/get-source";
import { failedHook, killPoint, never, runHandedOver } from "../../support/deploy-kill-points.ts";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { rejection } from "../../support/rejection.ts";

/**
 * `DELETE /v1/sources/{id}` within its request's time (issue 16, docs/aws.md "Deploy time
 * budget"): a `deactivate()` that cannot start with its whole limit left goes to the deploy
 * finisher, the source stopped and marked `deleting` meanwhile; an interruption anywhere is
 * finished by the recovery sweep.
 */

const DESCRIPTION: Partial<ComponentDescription> = {
  hooks: ["deploy", "activate", "deactivate"],
  props: [{ name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } }],
};

const HOOK_MS = 1_000;
/** The hook limit of an AWS deployment by default: no hook fits in API Gateway's 30 s. */
const HOOK_LIMIT_MS = 30_000;

type HangPoint = "hand-over" | "deactivate" | "remove";

interface Options {
  failing?: Set<string>;
  /** Where the process is killed (hangs) the first time it gets there, once armed. */
  hangAt?: HangPoint;
  finisherFails?: boolean;
}

async function setUp(options: Options = {}) {
  const failing = options.failing ?? new Set<string>();
  const ops: string[] = [];
  const timers: string[] = [];
  const handedOver: string[] = [];
  const { hangs, reached, arm } = killPoint<HangPoint>(options.hangAt, true);
  /** Called as a hook starts (a request that comes meanwhile). */
  const during: { hook?: (kind: string) => Promise<void> } = {};
  const { host } = scriptedHost(DESCRIPTION);
  let deps: Deps & { clock: { nowMs(): number; set(ms: number): void } };
  deps = memoryDeps(Date.UTC(2026, 10, 27, 0), {
    host: {
      ...host,
      invoke: async (code, invocation, handlers) => {
        if (invocation.kind === "deactivate" && hangs("deactivate")) return never();
        await during.hook?.(invocation.kind);
        ops.push(invocation.kind);
        deps.clock.set(deps.clock.nowMs() + HOOK_MS);
        if (failing.has(invocation.kind)) {
          return failedHook(invocation.invocationId, deps.clock.nowMs());
        }
        return host.invoke(code, invocation, handlers);
      },
      remove: async (target) => {
        if (hangs("remove")) return never();
        ops.push("remove");
        return host.remove(target);
      },
    },
    timers: {
      schedule: async (target) => void timers.push(`schedule ${timerTargetId(target)}`),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
  });
  deps.runtime = { ...deps.runtime, invocationTimeoutMs: HOOK_LIMIT_MS };
  const account = await accountIn(deps, "deleter");
  const caller = { userId: account.user.id };
  const made = await deploySource(deps, caller, { component_code: "hooked" });
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
    arm,
    during,
    withFinisher: () => {
      deps.deployFinisher = {
        finishLater: async (id) => {
          if (hangs("hand-over")) return never();
          if (options.finisherFails) throw new Error("Lambda said no");
          handedOver.push(id);
        },
      };
    },
    /** The deadline of an AWS route: never room for a hook's whole limit. */
    timed: () => ({ answerByMs: deps.clock.nowMs() + 29_000 }),
    finish: () => runHandedOver(deps, handedOver),
  };
}

describe("a DELETE in local mode (no deadline, no finisher)", () => {
  it("runs deactivate() in the request and removes the source", async () => {
    const t = await setUp();
    expect(await deleteSource(t.deps, t.caller, t.made.id)).toEqual({ id: t.made.id, deleted: true });
    expect(t.ops).toEqual(["deactivate", "remove"]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("removes the code an update built again for a source a DELETE removed meanwhile", async () => {
    const t = await setUp();
    const prepare = t.deps.host.prepare.bind(t.deps.host);
    t.deps.host = {
      ...t.deps.host,
      prepare: async (code, options) => {
        await deleteSource(t.deps, t.caller, t.made.id);
        return prepare(code, options);
      },
    };
    await expect(
      updateSource(t.deps, t.caller, t.made.id, { component_code: "hooked", name: "again" }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
    // The DELETE's removal, then the failed update's, after its prepare.
    expect(t.ops.filter((op) => op === "remove")).toHaveLength(2);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("answers 404 when its deactivate() failed because another DELETE removed the source's code meanwhile", async () => {
    const t = await setUp({ failing: new Set(["deactivate"]) });
    t.deps.host = { ...t.deps.host, wasRemoved: (id) => id === t.made.id };
    await expect(deleteSource(t.deps, t.caller, t.made.id)).rejects.toMatchObject({
      code: "not_found",
      message: "source not found",
    });
    expect(t.ops).toEqual(["deactivate"]);
    // Not marked: the other DELETE removes it.
    expect(await t.deps.sources.getSource(t.made.id)).not.toHaveProperty("deployStep");
  });

  it("keeps a source whose deactivate() failed stopped and failed; a DELETE again removes it without the hook", async () => {
    const t = await setUp({ failing: new Set(["deactivate"]) });
    const failed = await rejection(deleteSource(t.deps, t.caller, t.made.id));
    expect(failed).toMatchObject({ code: "validation" });
    expect(failed.message).toMatch(
      /the deactivate hook failed.*; DELETE the source again to remove it without its deactivate hook/,
    );
    const kept = await getSource(t.deps, t.caller, t.made.id);
    expect(kept).toMatchObject({ active: false, deploy_state: "failed" });
    expect(kept.deploy_error).toMatch(/delete the source again/);
    expect(t.timers).toContain(`cancel ${t.made.id}`);
    expect(await fireTimer(t.deps, t.made.id, t.deps.clock.nowMs())).toBeUndefined();
    expect(await deleteSource(t.deps, t.caller, t.made.id)).toEqual({ id: t.made.id, deleted: true });
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
    expect(t.ops.filter((op) => op === "deactivate")).toHaveLength(1);
  });
});

describe("a DELETE within its request's time (AWS)", () => {
  it("runs deactivate() in the request when its whole limit fits", async () => {
    const t = await setUp();
    t.withFinisher();
    await deleteSource(t.deps, t.caller, t.made.id, { answerByMs: t.deps.clock.nowMs() + 60_000 });
    expect(t.ops).toEqual(["deactivate", "remove"]);
    expect(t.handedOver).toEqual([]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("answers at once when deactivate() does not fit: the source is stopped, marked deleting, and the finisher removes it", async () => {
    const t = await setUp();
    t.withFinisher();
    const deadline = t.timed();
    expect(await deleteSource(t.deps, t.caller, t.made.id, deadline)).toEqual({ id: t.made.id, deleted: true });
    expect(t.deps.clock.nowMs()).toBeLessThanOrEqual(deadline.answerByMs);
    expect(t.ops).toEqual([]);
    expect(t.handedOver).toEqual([t.made.id]);
    // Stopped at once: no timer, no run (its endpoint answers as an inactive source's).
    expect(t.timers).toEqual([`cancel ${t.made.id}`]);
    expect(await fireTimer(t.deps, t.made.id, t.deps.clock.nowMs())).toBeUndefined();
    const deleting = await getSource(t.deps, t.caller, t.made.id);
    expect(deleting).toMatchObject({ active: false, deploy_state: "deleting" });
    expect(deleting).not.toHaveProperty("deploy_step");
    expect(getRoute.response.safeParse({ data: deleting }).success).toBe(true);
    // A PUT is 409; a second DELETE answers the same and hands nothing over again.
    await expect(updateSource(t.deps, t.caller, t.made.id, { active: true })).rejects.toMatchObject({
      code: "conflict",
      message: expect.stringContaining("is being deleted"),
    });
    expect(await deleteSource(t.deps, t.caller, t.made.id, t.timed())).toEqual({ id: t.made.id, deleted: true });
    expect(t.handedOver).toEqual([t.made.id]);
    expect(t.ops).toEqual([]);

    await t.finish();
    expect(t.ops).toEqual(["deactivate", "remove"]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
    // A second delivery of the job does nothing.
    expect(await finishDeploy(t.deps, t.made.id, t.deps.clock.nowMs() + 120_000)).toBe("skipped");
    expect(t.ops).toEqual(["deactivate", "remove"]);
  });

  it("answers a create retried with the key of a source being deleted 409, and makes a new source once it is gone", async () => {
    const t = await setUp();
    const request = { component_code: "hooked" };
    const keyed = await deploySource(t.deps, t.caller, request, { idempotencyKey: "create-1" });
    t.withFinisher();
    await deleteSource(t.deps, t.caller, keyed.id, t.timed());
    await expect(deploySource(t.deps, t.caller, request, { idempotencyKey: "create-1" })).rejects.toMatchObject({
      code: "conflict",
      message: expect.stringContaining(`source ${keyed.id}, created with this Idempotency-Key, is being deleted`),
    });
    await t.finish();
    const again = await deploySource(t.deps, t.caller, request, { idempotencyKey: "create-1" });
    expect(again.id).not.toBe(keyed.id);
  });

  it("stops a background deploy that a DELETE marked meanwhile, and deletes the source in its place", async () => {
    const t = await setUp();
    t.withFinisher();
    const created = await deploySource(t.deps, t.caller, { component_code: "hooked" }, t.timed());
    expect(created).toMatchObject({ deploy_state: "deploying" });
    expect(t.handedOver).toEqual([created.id]);
    // While the finisher runs deploy(), a DELETE comes: no time for deactivate(), so it marks the source.
    t.during.hook = async (kind) => {
      if (kind !== "deploy") return;
      t.during.hook = undefined;
      expect(await deleteSource(t.deps, t.caller, created.id, t.timed())).toEqual({ id: created.id, deleted: true });
    };
    const [job] = t.handedOver.splice(0);
    expect(await finishDeploy(t.deps, job as string, t.deps.clock.nowMs() + 120_000)).toBe("deleted");
    // activate() never ran, no timer was scheduled, and the source is gone, not brought back.
    expect(t.ops).toEqual(["deploy", "deactivate", "remove"]);
    expect(t.timers.filter((line) => line.startsWith("schedule"))).toEqual([]);
    expect(await t.deps.sources.getSource(created.id)).toBeUndefined();
    // The deletion's own job finds nothing left to do.
    expect(t.handedOver).toEqual([created.id]);
    await t.finish();
    expect(t.ops).toEqual(["deploy", "deactivate", "remove"]);
  });

  it("stops a background update that a DELETE marked meanwhile, and deletes the source in its place", async () => {
    const t = await setUp();
    t.withFinisher();
    const updating = await updateSource(t.deps, t.caller, t.made.id, { component_code: "hooked v2" }, t.timed());
    expect(updating).toMatchObject({ deploy_state: "deploying" });
    t.during.hook = async (kind) => {
      if (kind !== "deactivate") return;
      t.during.hook = undefined;
      await deleteSource(t.deps, t.caller, t.made.id, t.timed());
    };
    const [job] = t.handedOver.splice(0);
    expect(await finishDeploy(t.deps, job as string, t.deps.clock.nowMs() + 120_000)).toBe("deleted");
    // The update stopped after the previous settings' deactivate(): no activate(), no timer.
    expect(t.ops).toEqual(["deactivate", "deactivate", "remove"]);
    expect(t.timers.filter((line) => line.startsWith("schedule"))).toEqual([]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("removes an inactive source in the request, its deactivate() not due", async () => {
    const t = await setUp();
    t.withFinisher();
    await updateSource(t.deps, t.caller, t.made.id, { active: false });
    t.ops.length = 0;
    await deleteSource(t.deps, t.caller, t.made.id, t.timed());
    expect(t.ops).toEqual(["remove"]);
    expect(t.handedOver).toEqual([]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("keeps a source whose background deactivate() failed, failed; a DELETE then removes it without the hook", async () => {
    const t = await setUp({ failing: new Set(["deactivate"]) });
    t.withFinisher();
    await deleteSource(t.deps, t.caller, t.made.id, t.timed());
    expect(await finishDeploy(t.deps, t.made.id, t.deps.clock.nowMs() + 120_000)).toBe("failed");
    expect(await getSource(t.deps, t.caller, t.made.id)).toMatchObject({
      active: false,
      deploy_state: "failed",
      deploy_error: expect.stringContaining("the deactivate hook failed: the third party said no"),
    });
    t.ops.length = 0;
    await deleteSource(t.deps, t.caller, t.made.id, t.timed());
    expect(t.ops).toEqual(["remove"]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });

  it("removes the source at once, without the hook, when the finisher refuses the job", async () => {
    const t = await setUp({ finisherFails: true });
    t.withFinisher();
    expect(await deleteSource(t.deps, t.caller, t.made.id, t.timed())).toEqual({ id: t.made.id, deleted: true });
    expect(t.ops).toEqual(["remove"]);
    expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
  });
});

describe("a DELETE interrupted at its boundaries (AWS)", () => {
  const cases: { point: HangPoint; hooks: string[] }[] = [
    // The route killed after the mark, before the job was queued.
    { point: "hand-over", hooks: [] },
    // The finisher killed in deactivate(), or once it ran, while removing.
    { point: "deactivate", hooks: [] },
    { point: "remove", hooks: ["deactivate"] },
  ];
  for (const { point, hooks } of cases) {
    it(`leaves nothing once the sweep ran, when killed at: ${point}`, async () => {
      const t = await setUp({ hangAt: point });
      t.withFinisher();
      t.arm();
      if (point === "hand-over") void deleteSource(t.deps, t.caller, t.made.id, t.timed());
      else {
        await deleteSource(t.deps, t.caller, t.made.id, t.timed());
        void t.finish();
      }
      await t.reached;
      expect(t.ops).toEqual(hooks);
      expect(await getSource(t.deps, t.caller, t.made.id)).toMatchObject({ active: false, deploy_state: "deleting" });
      const began = (await t.deps.sources.getSource(t.made.id))?.deployingSince ?? 0;
      expect(await recoverInterruptedDeploys(t.deps, began)).toBe(0);
      expect(await recoverInterruptedDeploys(t.deps, began + 1)).toBe(1);
      // Removed without the hook: it ran at most once, in the finisher.
      expect(t.ops).toEqual([...hooks, "remove"]);
      expect(await t.deps.sources.getSource(t.made.id)).toBeUndefined();
      expect(await t.deps.sources.listActiveTimerSources()).toEqual([]);
      expect(await recoverInterruptedDeploys(t.deps, began + DEPLOY_ABANDONED_AFTER_MS)).toBe(0);
    });
  }
});
