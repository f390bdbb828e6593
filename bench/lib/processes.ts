import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { REPO_ROOT, type SluiceProcess, startSluice } from "../../test/support/local-process.ts";
import { monoMs, sleep } from "./clock.ts";
import { isSameProcess, readTree } from "./proc.ts";

/** A child process of the bench, stopped by `stop()` (SIGTERM, then SIGKILL after a grace). */
export interface BenchChild {
  child: ChildProcess;
  output(): string;
  stop(graceMs?: number): Promise<void>;
}

/** Every child the bench started and that has not exited yet (for an interrupted run). */
const running = new Set<ChildProcess>();

function remember(child: ChildProcess) {
  running.add(child);
  child.once("exit", () => running.delete(child));
}

/** SIGTERM to every child still running (the bench was interrupted); returns how many. */
export function terminateAll(): number {
  for (const child of running) child.kill("SIGTERM");
  return running.size;
}

function exitedPromise(child: ChildProcess) {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

async function stopChild(child: ChildProcess, graceMs: number) {
  const exited = exitedPromise(child);
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Spawns `node --import tsx <script> ...args` from the repository root and waits (at most
 * `readyMs`) for a line of its stdout matching `ready`; resolves with the match.
 */
export async function spawnBenchChild(
  script: string,
  args: string[],
  ready: RegExp,
  { readyMs = 20_000, ipc = false } = {},
): Promise<BenchChild & { match: RegExpExecArray }> {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: REPO_ROOT,
    stdio: ["pipe", "pipe", "pipe", ...(ipc ? (["ipc"] as const) : [])],
  });
  remember(child);
  let output = "";
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => (output += chunk));
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} was not ready in ${readyMs} ms:\n${output}`)), readyMs);
    child.stdout?.on("data", (chunk: string) => {
      output += chunk;
      const found = ready.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  }).catch(async (error) => {
    await stopChild(child, 1000);
    throw error;
  });
  return {
    child,
    match,
    output: () => output,
    async stop(graceMs = 3000) {
      child.stdin?.end();
      await stopChild(child, graceMs);
    },
  };
}

/** The bare reference server (reference-server.ts) in its own process. */
export async function startReference(): Promise<BenchChild & { url: string }> {
  const started = await spawnBenchChild("bench/lib/reference-server.ts", [], /listening (\d+)/);
  return { ...started, url: `http://127.0.0.1:${started.match[1]}/` };
}

/**
 * A process that keeps one core busy (cpu-hog.ts) until stopped: "the other core busy", as a
 * scenario's target may require. It is not below the server, so its CPU is not counted as Sluice's.
 */
export function startCpuHog(): Promise<BenchChild> {
  return spawnBenchChild("bench/lib/cpu-hog.ts", [], /spinning/);
}

export interface BenchServer {
  sluice: SluiceProcess;
  baseUrl: string;
  /** `http://127.0.0.1:<port>`: the root of endpoints and live streams. */
  root: string;
  apiKey: string;
  pid: number;
  /** Where the CPU profile goes when profiling, else undefined. */
  profileDir: string | undefined;
  dataDir: string;
  /**
   * Stops the server and any of its child processes still alive afterwards, and removes the
   * data directory it made (unless `keepData`, for a restart on the same data).
   */
  stop(options?: { keepData?: boolean }): Promise<void>;
}

export interface StartServerOptions {
  /** Extra environment (SLUICE_* settings). */
  env?: Record<string, string>;
  /** Writes a V8 CPU profile of the server process into this folder (as `--cpu-prof` would). */
  profileDir?: string;
  /** An existing data directory (a restart); else a fresh temporary one. */
  dataDir?: string;
}

/** Local mode as `npm start` starts it (test/support/local-process.ts), on 127.0.0.1 and a free port. */
export async function startServer(options: StartServerOptions = {}): Promise<BenchServer> {
  // At the default log level, as an operator runs it: a line per request is part of what is measured.
  const env: Record<string, string> = { SLUICE_HOST: "127.0.0.1", SLUICE_LOG_LEVEL: "info", ...options.env };
  if (options.profileDir) {
    mkdirSync(options.profileDir, { recursive: true });
    // Node 20 refuses --cpu-prof in NODE_OPTIONS: a preloaded module profiles through the inspector.
    // The sandbox children get an empty environment, so only the server process is profiled.
    const preload = pathToFileURL(join(REPO_ROOT, "bench", "lib", "cpu-profile-preload.mjs")).href;
    env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import ${preload}`.trim();
    env.BENCH_CPU_PROFILE_DIR = options.profileDir;
    // Through tsx, not the build (bin/launch.mjs): a profile's functions then name their source files.
    env.SLUICE_TSX = "1";
  }
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "sluice-bench-"));
  const sluice = await startSluice({ env, dataDir }).catch((error) => {
    if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  });
  remember(sluice.child);
  const pid = sluice.child.pid ?? 0;
  const startTicks = (await readTree(pid))[0]?.startTicks ?? -1;
  let stopping: Promise<void> | undefined;
  const server: BenchServer = {
    sluice,
    baseUrl: sluice.baseUrl,
    root: sluice.baseUrl.replace(/\/v1$/, ""),
    apiKey: sluice.apiKeyFromFile(),
    pid,
    profileDir: options.profileDir,
    dataDir,
    stop(stopOptions = {}) {
      // Idempotent: a second call waits for the first (the pid may belong to another process by then).
      stopping ??= stopTree(stopOptions.keepData ?? false);
      return stopping;
    },
  };
  async function stopTree(keepData: boolean) {
    const family = (await isSameProcess(pid, startTicks)) ? await readTree(pid).catch(() => []) : [];
    // SIGTERM lets the server stop its sandboxes and flush its profile; SIGKILL after 10 s.
    await sluice.stop("SIGTERM");
    // Children still alive after the server stopped (they should not be) are ended by pid,
    // checked against their start time so a reused pid is never hit.
    const deadline = monoMs() + 3000;
    for (const member of family) {
      if (member.pid === pid) continue;
      while ((await isSameProcess(member.pid, member.startTicks)) && monoMs() < deadline) await sleep(50);
      if (await isSameProcess(member.pid, member.startTicks)) {
        try {
          process.kill(member.pid, "SIGKILL");
        } catch {}
      }
    }
    if (ownDir && !keepData) rmSync(dataDir, { recursive: true, force: true });
  }
  return server;
}
