/** Helpers of the tests that run real sandbox children through `ProcessPoolHost`. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ProcessPoolHost, type ProcessPoolHostOptions } from "#adapters/local/process-pool-host";
import type { SourceCode } from "#core/ports/component-host";
import { sha256Hex } from "#core/sha256";
import type { Invocation } from "#runtime/protocol";

/** Whether process `pid` still runs. */
export const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * `path` as component code names it to reach the real file: a child's `/tmp/...` paths name its own
 * folder (`runtime-layer/tmp-folder.ts`), and these tests' work dirs are under `/tmp`; a path
 * relative to the child's working directory (the server's, here the test's) is taken as given, so
 * only the permission model stands in the way, as it does for a data dir elsewhere.
 */
export const realPathForChild = (path: string) => relative(process.cwd(), path);

/** Runs `body` with a host of its own (64 MiB heaps unless told), so that the children counted are the test's. */
export async function withPoolHost<T>(
  options: Omit<ProcessPoolHostOptions, "workDir">,
  body: (host: ProcessPoolHost, workDir: string) => Promise<T>,
  /** Fills the work dir before the host starts (what an earlier server left). */
  before?: (workDir: string) => void,
): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-pool-own-"));
  before?.(dir);
  const host = new ProcessPoolHost({ workDir: dir, heapMb: 64, ...options });
  try {
    return await body(host, dir);
  } finally {
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Source `sourceId` running `code`; two calls with one id and different code are two versions of one source. */
export function sourceCode(sourceId: string, code: string, ownerId = "o_owner"): SourceCode {
  return { sourceId, ownerId, code, codeHash: sha256Hex(code) };
}

let invocations = 0;

/** A run of source `sourceId` with no props, under an invocation id no other call gives. */
export function runInvocation(sourceId = "dc_source", overrides: Partial<Invocation> = {}): Invocation {
  invocations += 1;
  return {
    invocationId: `inv_${invocations}`,
    kind: "run",
    sourceId,
    props: {},
    propTypes: {},
    db: {},
    timeoutMs: 10_000,
    ...overrides,
  };
}
