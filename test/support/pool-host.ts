/** Helpers of the tests that run real sandbox children through `ProcessPoolHost`. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProcessPoolHost, type ProcessPoolHostOptions } from "#adapters/local/process-pool-host";

/** Whether process `pid` still runs. */
export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Runs `body` with a host of its own (64 MiB heaps unless told), so that the children counted are the test's. */
export async function withPoolHost<T>(
  options: Omit<ProcessPoolHostOptions, "workDir">,
  body: (host: ProcessPoolHost) => Promise<T>,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-pool-own-"));
  const host = new ProcessPoolHost({ workDir: dir, heapMb: 64, ...options });
  try {
    return await body(host);
  } finally {
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
