/** Exact latency statistics over every sample (no histogram buckets, no sampling). */

export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * The `p`-th percentile of ascending `sorted` values by the nearest-rank method: the smallest
 * value such that at least `p` percent of the samples are at or below it. NaN when empty.
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] as number;
}

/** Count, p50, p90, p99, max and mean of `values` (any order). */
export function summarize(values: readonly number[]): LatencySummary {
  const sorted = Array.from(Float64Array.from(values).sort());
  let total = 0;
  for (const value of sorted) total += value;
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
    mean: sorted.length ? total / sorted.length : Number.NaN,
  };
}

/** Rounds for reports: two decimals under 10, one under 100, none above. */
export function round(value: number): number {
  if (!Number.isFinite(value)) return value;
  const digits = Math.abs(value) < 10 ? 100 : Math.abs(value) < 100 ? 10 : 1;
  return Math.round(value * digits) / digits;
}

/** Every figure of `summary` (a {@link LatencySummary}, say) through {@link round}, for the JSON file. */
export function roundAll(summary: object): Record<string, number> {
  return Object.fromEntries(Object.entries(summary).map(([key, value]) => [key, round(value as number)]));
}
