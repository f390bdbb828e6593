/**
 * Milliseconds on the machine's monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux).
 * Unlike `Date.now()` it never jumps, and unlike `performance.now()` it has the same origin in
 * every process on the machine, so a time taken in the bench and one taken in a client child
 * process can be subtracted.
 */
export const monoMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `task` with a hard deadline: rejects with a clear message when it takes longer than
 * `ms`. The task is not cancelled; callers stop their processes in `finally`.
 */
export async function withDeadline<T>(what: string, ms: number, task: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${Math.round(ms / 1000)} s`)), ms);
  });
  try {
    return await Promise.race([task(), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `probe` until it returns something other than undefined, or throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  { timeoutMs = 30_000, intervalMs = 50 } = {},
): Promise<T> {
  const deadline = monoMs() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (monoMs() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(intervalMs);
  }
}
