import { monoMs, sleep } from "./clock.ts";
import { type LoadOptions, type LoadResult, runLoad } from "./load.ts";
import { formatValue, type Row } from "./report.ts";
import type { ScenarioContext } from "./scenario.ts";
import { round, roundAll } from "./stats.ts";

/** Requests sent to warm a path up (sandbox process started, bundle loaded) before measuring. */
export const WARMUP_REQUESTS = 50;

/** A small JSON body that carries its request index, as every scenario's load does. */
export const numberedBody = (index: number) => JSON.stringify({ n: index, note: "sluice bench" });

/**
 * Runs the same load against the bare reference server (its own child process, started and
 * stopped here), warmed up the same way. `durationMs` may be shorter than the scenario's: the
 * bare server's figures settle within seconds.
 */
export async function referenceLoad(context: ScenarioContext, options: Omit<LoadOptions, "url">): Promise<LoadResult> {
  const reference = await context.startReference();
  try {
    await runLoad({ ...options, url: reference.url, durationMs: 300, ratePerSec: undefined });
    return await runLoad({ ...options, url: reference.url });
  } finally {
    await reference.stop();
  }
}

/**
 * {@link runLoad} with {@link numberedBody} bodies that notes when each request `n` was sent
 * (`monoMs()`, to subtract from when its event arrived somewhere) and which were accepted (2xx).
 * Requests are numbered from `firstN` (default 0), so two loads on one receiver can be told apart.
 */
export async function trackedLoad(options: Omit<LoadOptions, "body" | "onAnswer"> & { firstN?: number }) {
  const { firstN = 0, ...loadOptions } = options;
  const sentAt = new Map<number, number>();
  const accepted: number[] = [];
  const load = await runLoad({
    ...loadOptions,
    body: (index) => {
      sentAt.set(firstN + index, monoMs());
      return numberedBody(firstN + index);
    },
    onAnswer: (index, status) => {
      if (status >= 200 && status < 300) accepted.push(firstN + index);
    },
  });
  return { load, sentAt, accepted };
}

/** A few sequential requests, so the first measured one does not start a sandbox process. */
export async function warmUp(url: string, body: (index: number) => string = numberedBody, count = WARMUP_REQUESTS) {
  for (let index = 0; index < count; index++) {
    await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: body(-1 - index) })
      .then((answer) => answer.arrayBuffer())
      .catch(() => undefined);
  }
}

/** Polls `count()` until it reaches `expected` or stops growing for `stallMs`; returns the last count and when it was reached. */
export async function waitForCount(
  count: () => Promise<number>,
  expected: number,
  { stallMs = 10_000, timeoutMs = 120_000, intervalMs = 100 } = {},
): Promise<{ count: number; reachedAt: number; complete: boolean }> {
  const deadline = monoMs() + timeoutMs;
  let last = -1;
  let lastChange = monoMs();
  let reachedAt = monoMs();
  for (;;) {
    const value = await count();
    const now = monoMs();
    if (value !== last) {
      last = value;
      lastChange = now;
      reachedAt = now;
    }
    if (value >= expected) return { count: value, reachedAt, complete: true };
    if (now - lastChange > stallMs || now > deadline) return { count: value, reachedAt, complete: false };
    await sleep(intervalMs);
  }
}

/** The load result as compact numbers for the JSON file. */
export function loadDetails(result: LoadResult) {
  return {
    mode: result.mode,
    concurrency: result.concurrency,
    ...(result.ratePerSec === undefined ? {} : { ratePerSec: result.ratePerSec }),
    sent: result.sent,
    ok: result.ok,
    statuses: result.statuses,
    elapsedMs: round(result.elapsedMs),
    okPerSec: round(result.okPerSec),
    latencyMs: roundAll(result.latency),
    lateSlots: result.lateSlots,
    errors: result.errors,
  };
}

/** A rate or a latency for notes and reference cells, written as the table writes them. */
export const perSec = (value: number) => formatValue(value, "/s");

export const ms = (value: number) => formatValue(value, "ms");

/**
 * The server's CPU per event (its process: main thread and its own threads) as a row without a
 * target, beside what a share target of the bare server's rate would leave it: at `sharePct`% of
 * `bareRate`, one core gives each event 1,000,000 ÷ (rate × share) µs. The server's work runs
 * mostly on one thread, so this is the budget the share targets set; CPU per event also moves far
 * less with the machine's load than a rate does.
 */
export function serverCpuRow(
  scenario: string,
  figure: string,
  serverMicros: number | undefined,
  sharePct: number,
  bareRate: number | undefined,
): Row {
  const atShare = bareRate === undefined ? undefined : (bareRate * sharePct) / 100;
  return {
    scenario,
    figure,
    measured: serverMicros,
    unit: "µs",
    ...(atShare
      ? {
          reference: `${sharePct}% of bare is ${perSec(atShare)}: ${formatValue(1e6 / atShare, "µs")} of one core each`,
        }
      : {}),
  };
}

/** CPU µs per stored event by process role, over what `cpuMs` added since `before`. */
export function cpuPerEvent(after: Record<string, number>, before: Record<string, number>, stored: number) {
  return Object.fromEntries(
    Object.entries(after).map(([role, total]) => [
      role,
      round(((total - (before[role] ?? 0)) * 1000) / Math.max(1, stored)),
    ]),
  );
}

/** `cpuPerEvent`'s figures as a note's text: the roles that cost at least 1 µs. */
export const describeCpu = (perEvent: Record<string, number>) =>
  Object.entries(perEvent)
    .filter(([, us]) => us >= 1)
    .map(([role, us]) => `${role} ${us} µs`)
    .join(", ");
