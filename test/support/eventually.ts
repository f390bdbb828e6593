import { performance } from "node:perf_hooks";

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  { timeoutMs = 15_000, intervalMs = 20 } = {},
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** `true` when `condition` holds, else undefined: a probe for {@link eventually}. */
export const when = (condition: boolean): true | undefined => (condition ? true : undefined);
