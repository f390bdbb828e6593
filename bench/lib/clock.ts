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
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([task(), expired]);
  } finally {
    clearTimeout(timer);
  }
}
