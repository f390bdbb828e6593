import { describe, expect, it } from "vitest";
import type { Quotas } from "#core/ports/deps";
import { STORED_TOTALS_MAX_AGE_MS } from "#core/quotas";
import { receiveHttpRequest } from "#core/source-endpoint";
import { deleteSourceEvents } from "#core/source-events";
import { fireTimer, runSource } from "#core/source-runs";
import { getMe } from "#core/workspaces";
import { endpointRequest, scriptedSource } from "../../support/scripted-sources.ts";

/**
 * Item 4 of issue 12: per-workspace quotas, checked in core on both platforms. A refused HTTP
 * request answers 429 with a JSON body and runs nothing; a refused timer or subscription run is
 * skipped; the source gets one `$errors` event per quota and window, however many were refused.
 */

const UNLIMITED: Quotas = {
  dailyInvocations: 0,
  dailyComputeTimeMs: 0,
  dailyCredits: 0,
  runsPerMinute: 0,
  storedEvents: 0,
  storedBytes: 0,
};

async function withQuotas(quotas: Partial<Quotas>, options: { customResponse?: boolean; emitsPerRun?: number } = {}) {
  const setup = await scriptedSource(
    async (_invocation, handlers) => {
      const response = { status: 200, headers: {}, body: "ran" };
      handlers?.onRespond?.(response);
      return {
        response,
        emits: Array.from({ length: options.emitsPerRun ?? 0 }, (_, n) => ({ event: { n }, meta: {} })),
      };
    },
    { customResponse: options.customResponse ?? true },
  );
  setup.deps.quotas = { ...UNLIMITED, ...quotas };
  const quotaErrors = async () =>
    (await setup.channel("$errors")).map(
      (event) => (event.event as { error: { code: string; message: string } }).error,
    );
  const post = () => receiveHttpRequest(setup.deps, setup.endpointKey, endpointRequest());
  return { ...setup, quotaErrors, post };
}

describe("runs per minute", () => {
  it("answers 429 past the quota, runs nothing, and notes it once per minute on $errors", async () => {
    const { deps, jobs, post, quotaErrors } = await withQuotas({ runsPerMinute: 3 }, { customResponse: false });
    const answers = [];
    for (let n = 0; n < 6; n++) answers.push(await post());
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(jobs).toHaveLength(3);
    const refused = answers[3];
    expect(refused?.headers["content-type"]).toMatch(/^application\/json/);
    expect(JSON.parse(refused?.body ?? "")).toEqual({
      error: expect.stringMatching(/^quota exceeded: .*3 runs this minute/),
      quota: "runs_per_minute",
      limit: 3,
    });
    // Seconds until the minute ends (the clock stands at a whole minute).
    expect(refused?.headers["retry-after"]).toBe("60");
    expect(await quotaErrors()).toEqual([
      expect.objectContaining({ code: "QuotaExceededError", message: expect.stringContaining("runs_per_minute") }),
    ]);

    deps.clock.set(deps.clock.nowMs() + 60_000);
    expect((await post()).status).toBe(200);
    for (let n = 0; n < 4; n++) await post();
    // A new minute, a new notice.
    expect(await quotaErrors()).toHaveLength(2);
  });

  it("skips a timer and a subscription run over the quota, and counts a queued HTTP run only when it arrived", async () => {
    const { deps, calls, source, post, quotaErrors } = await withQuotas(
      { runsPerMinute: 1 },
      { customResponse: false },
    );
    expect((await post()).status).toBe(200);
    // Admitted (and counted) on arrival: running the queued job checks nothing again.
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(calls).toHaveLength(1);
    expect(await fireTimer(deps, source.id, deps.clock.nowMs())).toBeUndefined();
    expect(await runSource(deps, { sourceId: source.id, trigger: "event", event: {} })).toBeUndefined();
    expect(calls).toHaveLength(1);
    expect(await quotaErrors()).toHaveLength(1);
  });
});

describe("daily quotas", () => {
  it("refuses runs once today's invocations reach the quota, on HTTP and on timers, until the next UTC day", async () => {
    const { deps, calls, source, post, quotaErrors, userId } = await withQuotas({ dailyInvocations: 2 });
    expect((await post()).status).toBe(200);
    expect((await post()).status).toBe(200);
    const refused = await post();
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ quota: "daily_invocations", limit: 2 });
    // The clock stands at 12:00 UTC: 12 hours to the next day.
    expect(refused.headers["retry-after"]).toBe(String(12 * 3600));
    expect(await fireTimer(deps, source.id, deps.clock.nowMs())).toBeUndefined();
    expect(calls).toHaveLength(2);
    expect(await quotaErrors()).toEqual([
      expect.objectContaining({ code: "QuotaExceededError", message: expect.stringContaining("daily_invocations") }),
    ]);
    // `/users/me` reports what is enforced.
    const me = await getMe(deps, { userId });
    expect(me).toMatchObject({ daily_invocations_quota: 2, daily_invocations_used: 2 });
    expect(me.orgs[0]).toMatchObject({ daily_invocations_quota: 2, daily_invocations_used: 2 });

    deps.clock.set(deps.clock.nowMs() + 12 * 3_600_000);
    expect((await post()).status).toBe(200);
  });

  it.each([
    ["dailyComputeTimeMs", "daily_compute_time_ms"],
    ["dailyCredits", "daily_credits"],
  ] as const)("refuses runs once %s is used up", async (setting, quota) => {
    const { post } = await withQuotas({ [setting]: 1 });
    // A scripted run takes 1 ms, which is 1 credit (at least one per run).
    expect((await post()).status).toBe(200);
    const second = await post();
    expect(second.status).toBe(429);
    expect(JSON.parse(second.body)).toMatchObject({ quota, limit: 1 });
  });
});

describe("storage quotas", () => {
  it("stores no new events once the workspace keeps its quota, keeps what it stored, and notes it once", async () => {
    const { deps, calls, source, channel, quotaErrors, userId } = await withQuotas(
      { storedEvents: 5 },
      { emitsPerRun: 3, customResponse: false },
    );
    // Totals are read at most once a second per workspace: each run comes a second later.
    const run = () => {
      deps.clock.set(deps.clock.nowMs() + STORED_TOTALS_MAX_AGE_MS);
      return runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    };
    await run();
    await run();
    // 6 stored: a run is checked before it stores, so one run can pass the quota by what it emits.
    expect(await channel("")).toHaveLength(6);
    await run();
    await run();
    expect(calls).toHaveLength(4);
    expect(await channel("")).toHaveLength(6);
    expect(await quotaErrors()).toEqual([
      expect.objectContaining({ code: "QuotaExceededError", message: expect.stringContaining("stored_events") }),
    ]);

    // Deleting frees the quota: the next run stores again.
    await deleteSourceEvents(deps, { userId }, source.id, {});
    await run();
    expect(await channel("")).toHaveLength(3);
  });

  it("counts bytes against the bytes quota", async () => {
    const { deps, source, channel, quotaErrors } = await withQuotas(
      { storedBytes: 5 },
      { emitsPerRun: 1, customResponse: false },
    );
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    deps.clock.set(deps.clock.nowMs() + STORED_TOTALS_MAX_AGE_MS);
    await runSource(deps, { sourceId: source.id, trigger: "http", event: {} });
    expect(await channel("")).toHaveLength(1);
    expect((await quotaErrors())[0]?.message).toContain("stored_bytes");
  });
});
