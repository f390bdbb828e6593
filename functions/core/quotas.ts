/**
 * Per-workspace quotas (docs/components.md "Limits"): runs per minute and the daily invocations,
 * compute time and credits that `/users/me` reports, checked before a run starts; events and bytes
 * kept stored, checked before a run's events are stored. A quota of 0 is unlimited and costs
 * nothing: no counter is read or written for it.
 *
 * A refusal is told to whoever caused it (a 429 to an HTTP caller) every time, and on the source's
 * `$errors` channel at most once per source, quota and window ({@link firstNoticeIn}), so a caller
 * retrying in a loop cannot fill the channel it is refused for.
 */
import type { Deps, Quotas } from "#core/ports/deps";
import type { StoredUsage } from "#core/ports/usage-store";
import { usageDay } from "./time.ts";

export type QuotaName =
  | "runs_per_minute"
  | "daily_invocations"
  | "daily_compute_time_ms"
  | "daily_credits"
  | "stored_events"
  | "stored_bytes";

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The name of the error a refusal is stored as on `$errors`. */
export const QUOTA_EXCEEDED_ERROR = "QuotaExceededError";

/** Why a workspace may not run or store now. */
export interface QuotaRefusal {
  quota: QuotaName;
  limit: number;
  message: string;
  /** The window the refusal belongs to: a minute, a UTC day, or an hour for the storage quotas. */
  windowStartMs: number;
  windowMs: number;
  /** Seconds until the quota's window ends; absent for storage, which frees up only when events go. */
  retryAfterSeconds?: number;
}

type QuotaDeps = Pick<Deps, "usage" | "quotas" | "clock">;

/** One credit per started 30 s of compute, as the original counts them. */
export const creditsOf = (computeTimeMs: number) => Math.max(1, Math.ceil(computeTimeMs / 30_000));

const windowOf = (now: number, windowMs: number) => Math.floor(now / windowMs) * windowMs;

/**
 * Whether the workspace may start a run now, counting it toward this minute when it may. The daily
 * counters are those of runs already applied, so runs in flight can pass a daily quota by a few.
 */
export async function runRefusal(deps: QuotaDeps, workspaceId: string): Promise<QuotaRefusal | undefined> {
  const { quotas } = deps;
  const now = deps.clock.nowMs();
  if (quotas.dailyInvocations > 0 || quotas.dailyComputeTimeMs > 0 || quotas.dailyCredits > 0) {
    const used = await deps.usage.getUsage(workspaceId, usageDay(now));
    const day = windowOf(now, DAY_MS);
    const over = overDaily(quotas, used);
    if (over) {
      return {
        ...over,
        windowStartMs: day,
        windowMs: DAY_MS,
        retryAfterSeconds: Math.ceil((day + DAY_MS - now) / 1000),
      };
    }
  }
  if (quotas.runsPerMinute > 0) {
    const minute = windowOf(now, MINUTE_MS);
    const runs = await deps.usage.countInWindow(`runs:${workspaceId}`, minute, MINUTE_MS);
    if (runs > quotas.runsPerMinute) {
      return {
        quota: "runs_per_minute",
        limit: quotas.runsPerMinute,
        message: `the workspace started ${quotas.runsPerMinute} runs this minute, its quota: the run was not started`,
        windowStartMs: minute,
        windowMs: MINUTE_MS,
        retryAfterSeconds: Math.ceil((minute + MINUTE_MS - now) / 1000),
      };
    }
  }
  return undefined;
}

function overDaily(
  quotas: Quotas,
  used: { invocations: number; computeTimeMs: number; credits: number },
): Pick<QuotaRefusal, "quota" | "limit" | "message"> | undefined {
  const checks = [
    ["daily_invocations", quotas.dailyInvocations, used.invocations, "invocations"],
    ["daily_compute_time_ms", quotas.dailyComputeTimeMs, used.computeTimeMs, "ms of compute time"],
    ["daily_credits", quotas.dailyCredits, used.credits, "credits"],
  ] as const;
  for (const [quota, limit, value, what] of checks) {
    if (limit > 0 && value >= limit) {
      return {
        quota,
        limit,
        message: `the workspace used ${value} ${what} today (UTC), its daily quota is ${limit}: the run was not started`,
      };
    }
  }
  return undefined;
}

/**
 * How old the stored totals a run is checked against may be. Every run that stores checks them,
 * and reading them costs a query (a DynamoDB Query on AWS); within this time a workspace can pass
 * its quota by what it stores meanwhile.
 */
export const STORED_TOTALS_MAX_AGE_MS = 1_000;
/** Stored totals read recently, per usage store (one per process) and workspace. */
const storedTotals = new WeakMap<object, Map<string, { readAtMs: number; stored: StoredUsage }>>();
const STORED_TOTALS_CACHED = 10_000;

async function recentStoredTotals(deps: QuotaDeps, workspaceId: string, now: number): Promise<StoredUsage> {
  let cache = storedTotals.get(deps.usage);
  if (!cache) {
    cache = new Map();
    storedTotals.set(deps.usage, cache);
  }
  const cached = cache.get(workspaceId);
  if (cached && now - cached.readAtMs < STORED_TOTALS_MAX_AGE_MS) return cached.stored;
  const stored = await deps.usage.getStored(workspaceId);
  if (cache.size >= STORED_TOTALS_CACHED) cache.clear();
  cache.set(workspaceId, { readAtMs: now, stored });
  return stored;
}

/**
 * Whether the workspace may store more events; it may until its totals (at most
 * {@link STORED_TOTALS_MAX_AGE_MS} old) reach a quota.
 */
export async function storageRefusal(deps: QuotaDeps, workspaceId: string): Promise<QuotaRefusal | undefined> {
  const { storedEvents, storedBytes } = deps.quotas;
  if (storedEvents === 0 && storedBytes === 0) return undefined;
  const now = deps.clock.nowMs();
  const stored = await recentStoredTotals(deps, workspaceId, now);
  const refusal = (quota: QuotaName, limit: number, what: string): QuotaRefusal => ({
    quota,
    limit,
    message: `the workspace keeps ${what} stored, its quota is ${limit}: this run's events were not stored (delete events, or wait for retention to remove old ones)`,
    windowStartMs: windowOf(now, HOUR_MS),
    windowMs: HOUR_MS,
  });
  if (storedEvents > 0 && stored.events >= storedEvents) {
    return refusal("stored_events", storedEvents, `${stored.events} events`);
  }
  if (storedBytes > 0 && stored.bytes >= storedBytes) {
    return refusal("stored_bytes", storedBytes, `${stored.bytes} bytes of events`);
  }
  return undefined;
}

/** True for the first refusal of this quota for this source in the refusal's window. */
export async function firstNoticeIn(deps: QuotaDeps, sourceId: string, refusal: QuotaRefusal): Promise<boolean> {
  const count = await deps.usage.countInWindow(
    `notice:${refusal.quota}:${sourceId}`,
    refusal.windowStartMs,
    refusal.windowMs,
  );
  return count === 1;
}
