/**
 * Starting a sandbox child (DESIGN.md decision 3): Node's permission model with read access to
 * the runtime entry's folder and one bundle folder only (no writes, no child processes, no
 * workers, no addons), an empty environment and a heap cap.
 *
 * Not covered: Node 20's permission model has no network restriction, so component code can open
 * sockets.
 */
import { type ChildProcess, fork } from "node:child_process";
import { dirname } from "node:path";

/** Bytes of the child's stderr kept to explain a crash (an OOM report is a few hundred). */
const STDERR_TAIL = 4096;

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
      "--experimental-permission",
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
