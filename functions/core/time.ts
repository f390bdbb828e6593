/** The times of the spec's wire shapes, and the day that keys daily usage. */

/** ISO 8601 in UTC, the spec's time of users, workspaces and projects. */
export const isoTime = (ms: number) => new Date(ms).toISOString();
/** Epoch seconds, the spec's time unit of components and sources. */
export const epochSeconds = (ms: number) => Math.floor(ms / 1000);
/** UTC day of a time, the key of daily usage counters. */
export const usageDay = (ms: number) => isoTime(ms).slice(0, 10);
