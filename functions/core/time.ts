/** The times of the spec's wire shapes, and the day that keys daily usage. */

let cachedSecond = Number.NaN;
let cachedPrefix = "";

/**
 * ISO 8601 in UTC (`new Date(ms).toISOString()`), the spec's time of users, workspaces and projects,
 * and of every log line and run context: the date and time up to the second are made once per
 * second, which is most of the cost. Anything but a whole ms of years 0 to 9999 goes the long way.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms)) return new Date(ms).toISOString();
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    const whole = new Date(second * 1000).toISOString();
    if (whole.length !== 24) return new Date(ms).toISOString();
    cachedPrefix = whole.slice(0, 19);
    cachedSecond = second;
  }
  const milli = ms - second * 1000;
  return `${cachedPrefix}.${milli < 10 ? "00" : milli < 100 ? "0" : ""}${milli}Z`;
}
/** Epoch seconds, the spec's time unit of components and sources. */
export const epochSeconds = (ms: number) => Math.floor(ms / 1000);
/** UTC day of a time, the key of daily usage counters. */
export const usageDay = (ms: number) => isoTime(ms).slice(0, 10);
