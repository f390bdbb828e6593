/**
 * Starting a sandbox child, and asking a fresh one to describe a bundle (`describeInSandbox`).
 * A child runs under Node's permission model (DESIGN.md decision 3) with read access to
 * the runtime entry's folder and one bundle folder only (no writes, no child processes, no
 * workers, no addons), an empty environment and a heap cap.
 *
 * Not covered: Node 20's permission model has no network restriction, so component code can open
 * sockets.
 *
 * Also bundled into the describer Lambda (`functions/internal/describer.ts`): import nothing here
 * that only local mode has.
 */
import { type ChildProcess, fork } from "node:child_process";
import { dirname } from "node:path";
import type { DescribeReply, DescribeRequest, SandboxMessage } from "#runtime/sandbox-protocol";

/** Bytes of the child's stderr kept to explain a crash (an OOM report is a few hundred). */
const STDERR_TAIL = 4096;

/** Node 22.13 renamed the flag; older Node (20 here) only knows the experimental one. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has("--permission")
  ? "--permission"
  : "--experimental-permission";

export interface SandboxProcess {
  readonly child: ChildProcess;
  /** The last few KiB the child wrote to stderr. */
  stderrTail(): string;
}

/**
 * Forks `entryPath` with read access to its folder and to `readDir` (a folder; a trailing `/` is
 * fine), nothing else. Output is drained so a chatty component never blocks on a full pipe.
 */
export function forkSandbox(entryPath: string, readDir: string, heapMb: number): SandboxProcess {
  const child = fork(entryPath, [], {
    execArgv: [
      PERMISSION_FLAG,
      `--allow-fs-read=${dirname(entryPath)}`,
      `--allow-fs-read=${readDir}`,
      "--disable-warning=ExperimentalWarning",
      "--enable-source-maps",
      `--max-old-space-size=${heapMb}`,
    ],
    env: {},
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    serialization: "json",
  });
  let stderr = "";
  child.stdout?.resume();
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL);
  });
  return { child, stderrTail: () => stderr };
}

/** Whether the child has not exited yet. */
export const isRunning = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

/** Why a child stopped, in words: `its process exited with code 1`, `... (out of memory)`. */
export function crashReason(code: number | null, signal: NodeJS.Signals | null, stderr: string): string {
  const how = signal ? `its process was killed by ${signal}` : `its process exited with code ${code}`;
  if (isOutOfMemory(stderr)) return `${how} (out of memory)`;
  const lastLine = stderr.trim().split("\n").at(-1);
  return lastLine ? `${how}: ${lastLine}` : how;
}

export const isOutOfMemory = (stderr: string) => /heap out of memory|Allocation failed/i.test(stderr);

/**
 * Evaluates the bundle at `bundlePath` in a fresh sandbox child (read access to the bundle's
 * folder) and returns its description. Whatever the code does (throws, outlives `timeoutMs`,
 * kills its process) is a failed reply; the child never outlives this call.
 *
 * @throws Error only when the child cannot be started.
 */
export function describeInSandbox(
  entryPath: string,
  bundlePath: string,
  limits: { readonly timeoutMs: number; readonly heapMb: number },
): Promise<DescribeReply> {
  const { child, stderrTail } = forkSandbox(entryPath, `${dirname(bundlePath)}/`, limits.heapMb);
  const request: DescribeRequest = { type: "describe", requestId: "describe", bundlePath };
  const failed = (message: string): DescribeReply => ({ ok: false, error: { message } });

  return new Promise<DescribeReply>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // SIGKILL, not SIGTERM: user code may have installed a SIGTERM handler while loading.
      if (isRunning(child)) child.kill("SIGKILL");
      outcome();
    };
    const timer = setTimeout(
      () => finish(() => resolve(failed(`loading the component took longer than ${limits.timeoutMs / 1000}s`))),
      limits.timeoutMs,
    );
    child.on("message", (message: SandboxMessage | null) => {
      if (message?.type === "ready") {
        // Sent only once the child listens: a message that arrives earlier is lost.
        child.send(request, (error) => {
          if (error) finish(() => resolve(failed(`the component could not be loaded: ${error.message}`)));
        });
      } else if (message?.type === "described") {
        const { type: _type, requestId: _requestId, ...reply } = message;
        finish(() => resolve(reply as DescribeReply));
      }
    });
    child.once("error", (error) => finish(() => reject(error)));
    child.once("exit", (code, signal) =>
      finish(() => resolve(failed(`the component could not be loaded: ${crashReason(code, signal, stderrTail())}`))),
    );
  });
}
