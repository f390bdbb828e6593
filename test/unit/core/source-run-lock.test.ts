import { describe, expect, it } from "vitest";
import { LocalSourceRunLock } from "#adapters/local/local-source-run-lock";
import { systemClock } from "#core/ports/clock";
import type { SourceRunLock } from "#core/ports/source-run-lock";
import { receiveHttpRequest } from "#core/source-endpoint";
import { runSource } from "#core/source-runs";
import { deploySource, updateSource } from "#core/sources";
import { countConcurrentRuns, EMPTY_POST, endpointKeyOf } from "../../support/db-counter.ts";
import { accountIn, memoryDeps, scriptedHost } from "../../support/memory-deps.ts";

const HTTP = { name: "http", type: "$.interface.http", customResponse: true };
const DB = { name: "db", type: "$.service.db" };

/** A source of a scripted component with `props`, whose runs record when they start and end. */
async function tracedSource(
  props: object[],
  runLock?: SourceRunLock,
  invocationTimeoutMs = 5_000,
  hooks: string[] = [],
) {
  const trace: string[] = [];
  let inside = 0;
  let most = 0;
  const { host, calls } = scriptedHost({ props: props as never, hooks: hooks as never }, async (invocation) => {
    inside++;
    most = Math.max(most, inside);
    trace.push(`start ${invocation.kind}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
    inside--;
    trace.push(`end ${invocation.kind}`);
    return { response: { status: 200, headers: {}, body: "ok" } };
  });
  const timers = { schedule: async () => {}, cancel: async () => {} };
  const deps = memoryDeps(Date.now(), { host, timers, ...(runLock ? { runLock } : {}) });
  deps.runtime.invocationTimeoutMs = invocationTimeoutMs;
  const account = await accountIn(deps, "traced");
  const source = await deploySource(deps, { userId: account.user.id }, { component_code: "code" });
  const caller = { userId: account.user.id };
  return { deps, source, caller, calls, trace, most: () => most, key: endpointKeyOf(source) };
}

describe("runs of a source with $.service.db", () => {
  it("give N concurrent requests to a counter N distinct counts", async () => {
    expect(await countConcurrentRuns(12)).toEqual(Array.from({ length: 12 }, (_, index) => index + 1));
  });

  it("go one at a time, while runs of a source without a db prop overlap", async () => {
    const withDb = await tracedSource([HTTP, DB]);
    await Promise.all(Array.from({ length: 4 }, () => receiveHttpRequest(withDb.deps, withDb.key, EMPTY_POST)));
    expect(withDb.most()).toBe(1);

    const withoutDb = await tracedSource([HTTP]);
    await Promise.all(Array.from({ length: 4 }, () => receiveHttpRequest(withoutDb.deps, withoutDb.key, EMPTY_POST)));
    expect(withoutDb.most()).toBe(4);
  });

  it("count hooks as runs: an update's hooks wait for the run in progress, and runs for the hooks", async () => {
    const traced = await tracedSource([HTTP, DB], undefined, 5_000, ["deactivate", "activate"]);
    traced.trace.length = 0;
    await Promise.all([
      receiveHttpRequest(traced.deps, traced.key, EMPTY_POST),
      updateSource(traced.deps, traced.caller, traced.source.id, { name: "renamed" }),
      receiveHttpRequest(traced.deps, traced.key, EMPTY_POST),
    ]);
    expect(traced.most()).toBe(1);
    expect(traced.trace.filter((line) => line.startsWith("start"))).toHaveLength(4);
  });

  it("answer a custom-response request that cannot start within its time limit as a timeout, recorded on $errors", async () => {
    const lock = new LocalSourceRunLock(systemClock);
    const traced = await tracedSource([HTTP, DB], lock, 200);
    const blocker = await lock.acquire(traced.source.id, { leaseMs: 60_000 });
    const answer = await receiveHttpRequest(traced.deps, traced.key, EMPTY_POST);
    expect(answer.status).toBe(504);
    const errors = await traced.deps.events.listEvents(traced.source.id, { limit: 10, channel: "$errors" });
    expect(errors.items.map((event) => (event.event as { error: { message: string } }).error.message)).toEqual([
      expect.stringContaining("waited for the source's earlier runs past its time limit"),
    ]);
    // A queued run waits instead, and runs once the source is free.
    const queued = runSource(traced.deps, { sourceId: traced.source.id, trigger: "http", event: {} });
    await blocker?.release();
    expect((await queued)?.result.error).toBeUndefined();
  });
});
