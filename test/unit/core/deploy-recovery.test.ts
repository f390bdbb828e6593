import { describe, expect, it } from "vitest";
import type { ComponentDescription } from "#core/component-model";
import { IDEMPOTENCY_KEY_TTL_MS } from "#core/idempotency-keys";
import type { Deps } from "#core/ports/deps";
import type { IdentityStore } from "#core/ports/identity-store";
import { timerTargetId } from "#core/ports/timers";
import {
  DEPLOY_ABANDONED_AFTER_MS,
  deleteSource,
  deploySource,
  getSource,
  listUserSources,
  recoverInterruptedDeploys,
  updateSource,
} from "#core/sources";
import { createDeploySweeperHandler } from "#internal/deploy-sweeper";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";
import { recordingLogger } from "../../support/recording-logger.ts";
import { sourceRecord } from "../../support/source-record.ts";

/**
 * Deploys interrupted at each of their steps (the process or Lambda function killed there: the
 * step never returns, nothing after it runs), then the recovery sweep a restart or the AWS deploy
 * sweeper runs; and the `Idempotency-Key` of `POST /v1/sources` (docs/components.md "Retrying a deploy").
 */

const TIMER_SOURCE: Partial<ComponentDescription> = {
  hooks: ["deploy", "activate"],
  props: [
    { name: "timer", type: "$.interface.timer", default: { intervalSeconds: 60 } },
    { name: "http", type: "$.interface.http" },
  ],
};

/** A step that never returns, once; `reached` resolves when a deploy got there. */
function hangOnce() {
  let armed = true;
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => (reach = resolve));
  return {
    reached,
    /** True (and hangs from then on) the first time it is asked. */
    take(): boolean {
      if (!armed) return false;
      armed = false;
      reach();
      return true;
    },
  };
}

const never = () => new Promise<never>(() => {});

type CrashPoint = "prepare" | "deploy hook" | "activate hook" | "timer" | "final write";

async function setUp(crashAt?: CrashPoint) {
  const hang = hangOnce();
  const { host, calls } = scriptedHost(TIMER_SOURCE);
  const removed: string[] = [];
  const timers: string[] = [];
  const deps = memoryDeps(Date.UTC(2026, 10, 26, 12), {
    host: {
      ...host,
      prepare: async (code) => (crashAt === "prepare" && hang.take() ? never() : host.prepare(code)),
      remove: async (code) => void removed.push(code.sourceId),
      invoke: async (source, invocation, handlers) => {
        const point = `${invocation.kind} hook`;
        return crashAt === point && hang.take() ? never() : host.invoke(source, invocation, handlers);
      },
    },
    timers: {
      schedule: async (target) =>
        crashAt === "timer" && hang.take() ? never() : void timers.push(`schedule ${timerTargetId(target)}`),
      cancel: async (target) => void timers.push(`cancel ${timerTargetId(target)}`),
    },
  });
  if (crashAt === "final write") {
    const sources = deps.sources;
    const update = sources.updateSource.bind(sources);
    // The last write is the one that clears the mark.
    sources.updateSource = async (source) =>
      source.deployingSince === undefined && hang.take() ? never() : update(source);
  }
  const account = await accountIn(deps, "deployer");
  return { deps, calls, removed, timers, hang, account, caller: { userId: account.user.id } };
}

/** Deploys whose `deploy()` waits until the test calls `release`. */
async function heldDeploys() {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const { host } = scriptedHost(TIMER_SOURCE, async (invocation) => {
    if (invocation.kind === "deploy") await released;
    return {};
  });
  const deps = memoryDeps(Date.UTC(2026, 10, 26, 12), {
    host,
    timers: { schedule: async () => {}, cancel: async () => {} },
  });
  return { deps, caller: { userId: (await accountIn(deps, "held")).user.id }, release };
}

const countSources = async (deps: Deps, userId: string) =>
  (await listUserSources(deps, { userId }, { limit: 100 })).page_info.total_count;

describe("a deploy interrupted at any step", () => {
  const points: CrashPoint[] = ["prepare", "deploy hook", "activate hook", "timer", "final write"];
  for (const point of points) {
    it(`leaves no source once the sweep ran, when killed at: ${point}`, async () => {
      const { deps, caller, hang, removed, timers } = await setUp(point);
      void deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "k-1" });
      await hang.reached;

      // While it is "running", its reads say so; the spec's fields are there as ever.
      const listed = await listUserSources(deps, caller, { limit: 10 });
      expect(listed.data).toHaveLength(1);
      const half = listed.data[0]!;
      expect(half.deploy_state).toBe("deploying");
      expect((await getSource(deps, caller, half.id)).deploy_state).toBe("deploying");
      await expect(updateSource(deps, caller, half.id, { active: false })).rejects.toMatchObject({
        code: "conflict",
      });

      // A sweep with a bound before the deploy began leaves it; the restart's sweep removes it.
      expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs() - 1)).toBe(0);
      expect(await countSources(deps, caller.userId)).toBe(1);
      deps.clock.set(deps.clock.nowMs() + 1);
      expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs())).toBe(1);
      expect(await countSources(deps, caller.userId)).toBe(0);
      expect(await deps.sources.getSource(half.id)).toBeUndefined();
      expect(await deps.sources.listActiveTimerSources()).toEqual([]);
      expect(removed).toEqual([half.id]);
      // Whatever timer it had started is cancelled.
      expect(timers.at(-1)).toBe(`cancel ${half.id}`);
      // Its key went with it: the client's retry deploys afresh (the step no longer hangs).
      const retried = await deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "k-1" });
      expect(retried.id).not.toBe(half.id);
      expect(retried.deploy_state).toBeUndefined();
      expect(await countSources(deps, caller.userId)).toBe(1);
    });
  }

  it("is swept on AWS by the deploy sweeper only once it began more than the bound ago", async () => {
    const { deps, caller, hang } = await setUp("deploy hook");
    const sweep = createDeploySweeperHandler(async () => deps);
    void deploySource(deps, caller, { component_code: "code" });
    await hang.reached;
    deps.clock.set(deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS);
    await sweep();
    expect(await countSources(deps, caller.userId)).toBe(1);
    deps.clock.set(deps.clock.nowMs() + 1);
    await sweep();
    expect(await countSources(deps, caller.userId)).toBe(0);
  });

  it("removes the other interrupted deploys when one cannot be removed, and that one at the next sweep", async () => {
    const { deps, caller } = await setUp();
    const errors: Record<string, unknown>[] = [];
    const marked = (id: string) => ({
      ...sourceRecord({ user: { id: caller.userId }, workspace: { id: "o_x" } }, id),
      nameSlug: id,
      deployingSince: 1,
    });
    await deps.sources.createSource(marked("dc_a"));
    await deps.sources.createSource(marked("dc_b"));
    let failing = true;
    const remove = deps.host.remove;
    const sweeping = {
      ...deps,
      log: recordingLogger(errors),
      host: {
        ...deps.host,
        remove: async (code: { sourceId: string; ownerId: string }) => {
          if (failing && code.sourceId === "dc_a") throw new Error("Lambda throttled");
          return remove(code);
        },
      },
    };
    expect(await recoverInterruptedDeploys(sweeping, 2)).toBe(1);
    expect(await deps.sources.getSource("dc_b")).toBeUndefined();
    expect(await deps.sources.getSource("dc_a")).toBeDefined();
    expect(errors).toEqual([
      expect.objectContaining({
        message: "interrupted deploy not removed",
        source_id: "dc_a",
        error: "Error: Lambda throttled",
      }),
    ]);
    failing = false;
    expect(await recoverInterruptedDeploys(sweeping, 2)).toBe(1);
    expect(await deps.sources.getSource("dc_a")).toBeUndefined();
  });

  it("finishes a deploy that was not interrupted with no mark, so no sweep touches it", async () => {
    const { deps, caller } = await setUp();
    const source = await deploySource(deps, caller, { component_code: "code" });
    expect(source).not.toHaveProperty("deploy_state");
    deps.clock.set(deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS * 2);
    expect(await recoverInterruptedDeploys(deps, deps.clock.nowMs())).toBe(0);
    expect((await getSource(deps, caller, source.id)).id).toBe(source.id);
  });
});

describe("Idempotency-Key on POST /v1/sources", () => {
  it("answers the same source to a retry of the same request, deploying once", async () => {
    const { deps, caller, calls } = await setUp();
    const first = await deploySource(deps, caller, { component_code: "code", name: "a" }, { idempotencyKey: "k" });
    // Key order does not make another request.
    const again = await deploySource(
      deps,
      caller,
      { name: "a", component_code: "code", configured_props: undefined },
      { idempotencyKey: "k" },
    );
    expect(again).toStrictEqual(first);
    expect(await countSources(deps, caller.userId)).toBe(1);
    expect(calls.map((call) => call.kind)).toEqual(["deploy", "activate"]);
    // Without the key, the same request is another source.
    await deploySource(deps, caller, { component_code: "code", name: "a" });
    expect(await countSources(deps, caller.userId)).toBe(2);
  });

  it("answers 422 naming the header to the same key with another request", async () => {
    const { deps, caller } = await setUp();
    await deploySource(deps, caller, { component_code: "code", name: "a" }, { idempotencyKey: "k" });
    const other = deploySource(deps, caller, { component_code: "code", name: "b" }, { idempotencyKey: "k" });
    await expect(other).rejects.toMatchObject({
      code: "unprocessable",
      message: expect.stringContaining("Idempotency-Key"),
    });
    expect(await countSources(deps, caller.userId)).toBe(1);
  });

  it("answers 409 to a retry while the first request is still deploying, and the source once it finished", async () => {
    const { deps, caller, release } = await heldDeploys();
    const first = deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "slow-1" });
    // Two at once with the key while it runs: neither deploys a second source.
    const during = await Promise.allSettled([
      deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "slow-1" }),
      deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "slow-1" }),
    ]);
    for (const result of during) {
      expect(result.status).toBe("rejected");
      expect((result as PromiseRejectedResult).reason).toMatchObject({
        code: "conflict",
        message: expect.stringContaining("still in progress"),
      });
    }
    release();
    const made = await first;
    expect((await deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "slow-1" })).id).toBe(
      made.id,
    );
    expect(await countSources(deps, caller.userId)).toBe(1);
  });

  it("lets one of two creates racing with a new key deploy, and answers the other 409", async () => {
    const { deps, caller, release } = await heldDeploys();
    // Both look the key up before either saves: the store's claim decides.
    const both = [1, 2].map(() => deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "race" }));
    setTimeout(release, 50);
    const results = await Promise.allSettled(both);
    expect(results.map((result) => result.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(await countSources(deps, caller.userId)).toBe(1);
  });

  it("forgets the key after 24 hours, and when the deploy failed or the source was deleted", async () => {
    let failDeploy = true;
    const { host } = scriptedHost(TIMER_SOURCE, async (invocation) =>
      invocation.kind === "deploy" && failDeploy ? { error: { name: "Error", message: "upstream down", ts: 1 } } : {},
    );
    const deps = memoryDeps(Date.UTC(2026, 10, 26, 12), {
      host,
      timers: { schedule: async () => {}, cancel: async () => {} },
    });
    const caller = { userId: (await accountIn(deps, "forget")).user.id };
    const body = { component_code: "code" };
    await expect(deploySource(deps, caller, body, { idempotencyKey: "f" })).rejects.toThrow("upstream down");
    failDeploy = false;
    const made = await deploySource(deps, caller, body, { idempotencyKey: "f" });
    deps.clock.set(deps.clock.nowMs() + IDEMPOTENCY_KEY_TTL_MS - 1);
    expect((await deploySource(deps, caller, body, { idempotencyKey: "f" })).id).toBe(made.id);
    deps.clock.set(deps.clock.nowMs() + 1);
    const fresh = await deploySource(deps, caller, body, { idempotencyKey: "f" });
    expect(fresh.id).not.toBe(made.id);
    await deleteSource(deps, caller, fresh.id);
    expect((await deploySource(deps, caller, body, { idempotencyKey: "f" })).id).not.toBe(fresh.id);
  });

  it("takes over a key whose deploy was abandoned past the bound, before any sweep", async () => {
    const { deps, caller, hang } = await setUp("deploy hook");
    void deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "a" });
    await hang.reached;
    const [half] = (await listUserSources(deps, caller, { limit: 10 })).data;
    deps.clock.set(deps.clock.nowMs() + DEPLOY_ABANDONED_AFTER_MS - 1);
    await expect(deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "a" })).rejects.toMatchObject(
      { code: "conflict" },
    );
    deps.clock.set(deps.clock.nowMs() + 2);
    const retried = await deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "a" });
    expect(retried.id).not.toBe(half!.id);
    expect(await deps.sources.getSource(half!.id)).toBeUndefined();
    expect(await countSources(deps, caller.userId)).toBe(1);
  });

  it("keeps keys per user: another user's same key never reaches the first user's source", async () => {
    const { deps, caller } = await setUp();
    const mine = await deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: "shared" });
    const other = { userId: (await accountIn(deps, "intruder")).user.id };
    const theirs = await deploySource(deps, other, { component_code: "code" }, { idempotencyKey: "shared" });
    expect(theirs.id).not.toBe(mine.id);
    expect(theirs.user_id).toBe(other.userId);
    // A different body from the other user is their own first request, not a 422 about mine.
    const third = await deploySource(
      deps,
      { userId: (await accountIn(deps, "third")).user.id },
      { key: "x" },
      {
        idempotencyKey: "shared",
      },
    ).catch((error: unknown) => error);
    expect(third).not.toMatchObject({ code: "unprocessable" });
  });

  it("never answers a source of a workspace its user left, and takes another workspace as another request", async () => {
    const { deps: base, caller, account } = await setUp();
    // A second workspace of the caller's, until the caller leaves it (no use case adds members yet).
    const team = await accountIn(base, "team");
    let member = true;
    const identity: IdentityStore = Object.create(base.identity);
    identity.getMembership = async (workspaceId, userId) =>
      member && workspaceId === team.workspace.id && userId === caller.userId
        ? { workspaceId, userId, role: "member", createdAt: 0 }
        : base.identity.getMembership(workspaceId, userId);
    const deps = { ...base, identity };
    const body = { component_code: "code", org_id: team.workspace.id };
    const inTeam = await deploySource(deps, caller, body, { idempotencyKey: "w" });
    expect(inTeam.owner_id).toBe(team.workspace.id);
    await expect(
      deploySource(deps, caller, { ...body, org_id: account.workspace.id }, { idempotencyKey: "w" }),
    ).rejects.toMatchObject({ code: "unprocessable" });
    member = false;
    await expect(deploySource(deps, caller, body, { idempotencyKey: "w" })).rejects.toMatchObject({
      code: "not_found",
    });
    expect((await deps.sources.getSource(inTeam.id))?.workspaceId).toBe(team.workspace.id);
  });

  it("refuses keys that are empty, longer than 255 characters or not printable ASCII, naming the header", async () => {
    const { deps, caller } = await setUp();
    for (const key of ["", "x".repeat(256), "tab\there", "é-key", "line\nbreak"]) {
      await expect(
        deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: key }),
      ).rejects.toMatchObject({ code: "validation", issues: [{ field: "Idempotency-Key" }] });
    }
    await expect(
      deploySource(deps, caller, { component_code: "code" }, { idempotencyKey: ` ${"x".repeat(254)}` }),
    ).resolves.toHaveProperty("id");
    expect(await countSources(deps, caller.userId)).toBe(1);
  });
});
