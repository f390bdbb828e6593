import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** `bin/sluice.mjs` (as `npm start` and the `sluice` bin run it), followed by the command's arguments. */
const SLUICE_ARGS = ["bin/sluice.mjs"];

/** The test's environment minus every SLUICE_ variable, plus `env`. */
function sluiceEnv(env: Record<string, string> = {}): Record<string, string> {
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !name.startsWith("SLUICE_")) clean[name] = value;
  }
  return { ...clean, ...env };
}

/**
 * Runs one `sluice` command (`create-user`, `create-key`...) to its end in the environment of
 * {@link sluiceEnv}. Resolves with its output; rejects, with `code` and `stderr`, when it exits
 * with an error. Bounded: killed after 60 s (the longest a test hook waits).
 */
export function runSluice(args: string[], env: Record<string, string> = {}) {
  return promisify(execFile)(process.execPath, [...SLUICE_ARGS, ...args], {
    cwd: REPO_ROOT,
    env: sluiceEnv(env),
    timeout: 60_000,
  });
}

export interface SluiceProcess {
  baseUrl: string;
  dataDir: string;
  child: ChildProcess;
  /**
   * What the process printed so far, stdout and stderr: all of it up to {@link OUTPUT_HEAD_CHARS},
   * then the newest {@link OUTPUT_TAIL_CHARS} (a busy server logs a line per request).
   */
  output(): string;
  apiKeyFromFile(): string;
  /** Sends `signal` and resolves with how the process ended. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export const OUTPUT_HEAD_CHARS = 64 * 1024;
export const OUTPUT_TAIL_CHARS = 1024 * 1024;

/** Collects a process's output, keeping its start and its newest part. */
function outputCollector() {
  let head = "";
  let tail = "";
  let skipped = 0;
  return {
    add(chunk: string) {
      if (head.length < OUTPUT_HEAD_CHARS) {
        const room = OUTPUT_HEAD_CHARS - head.length;
        head += chunk.slice(0, room);
        chunk = chunk.slice(room);
      }
      tail += chunk;
      if (tail.length > 2 * OUTPUT_TAIL_CHARS) {
        skipped += tail.length - OUTPUT_TAIL_CHARS;
        tail = tail.slice(-OUTPUT_TAIL_CHARS);
      }
    },
    text: () => (skipped > 0 ? `${head}\n[... ${skipped} characters not kept ...]\n${tail}` : head + tail),
  };
}

export const newDataDir = () => mkdtempSync(join(tmpdir(), "sluice-e2e-"));

/**
 * Starts local mode the way `npm start` does (`node bin/sluice.mjs start`), on a free port, and waits for
 * its readiness line. The environment is the test's minus every SLUICE_ variable, plus `env`;
 * it logs warnings and errors only (`SLUICE_LOG_LEVEL=warn`) unless `env` says otherwise.
 * With `openFile`, the process starts holding that file open on that descriptor without
 * close-on-exec, as after a shell's `exec 40<file` (a descriptor passed in `stdio` gets
 * close-on-exec from Node, so it takes a shell). A relative `dataDir` is given to the server as it
 * is (relative to the repo root); the returned `dataDir` is absolute.
 */
export async function startSluice(
  options: {
    dataDir?: string;
    env?: Record<string, string>;
    openFile?: { fd: number; path: string };
    /** Starts the server allowed core dumps of any size (its soft limit raised to the hard one), as some machines do. */
    coreDumps?: boolean;
  } = {},
): Promise<SluiceProcess> {
  // A relative data dir is the server's to resolve, against the repo root where `npm start` runs.
  const given = options.dataDir ?? newDataDir();
  const dataDir = resolve(REPO_ROOT, given);
  const shellSteps = [
    ...(options.coreDumps ? ["ulimit -c hard 2>/dev/null || ulimit -c unlimited"] : []),
    ...(options.openFile ? [`exec ${Math.trunc(options.openFile.fd)}<"$1"`] : []),
  ];
  const [command, args] =
    shellSteps.length > 0
      ? [
          "bash",
          [
            "-c",
            `${shellSteps.join("; ")}; shift; exec "$@"`,
            "bash",
            options.openFile?.path ?? "",
            process.execPath,
            ...SLUICE_ARGS,
            "start",
          ],
        ]
      : [process.execPath, [...SLUICE_ARGS, "start"]];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    env: sluiceEnv({ PORT: "0", SLUICE_DATA_DIR: given, SLUICE_LOG_LEVEL: "warn", ...options.env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  const collected = outputCollector();
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => collected.add(chunk));
  child.stderr?.on("data", (chunk: string) => collected.add(chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );

  const baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`local mode did not start in 30 s:\n${collected.text()}`)), 30_000);
    const onData = () => {
      const ready = /Sluice is ready at (http:\/\/\S+\/v1)/.exec(collected.text());
      if (ready?.[1]) {
        clearTimeout(timer);
        resolve(ready[1]);
      }
    };
    child.stdout?.on("data", onData);
    exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`local mode exited before it was ready:\n${collected.text()}`));
    });
  });

  return {
    baseUrl,
    dataDir,
    child,
    output: () => collected.text(),
    apiKeyFromFile: () => readFileSync(join(dataDir, "api-key"), "utf8").trim(),
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** The installable `sluice` command (package.json `bin`), which a user's shell runs by its shebang. */
export const SLUICE_BIN = join(REPO_ROOT, "bin/sluice.mjs");

/** A `sluice` command started by {@link spawnSluiceBin}. */
export interface SluiceCommand {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with how it ended (a `timeoutMs` past its start kills it). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts the `sluice` bin (run as its shebang runs it) with `args`, in `cwd`, in the environment
 * of {@link sluiceEnv} plus `env`; stdin is closed (not a terminal). Killed after `timeoutMs`.
 */
export function spawnSluiceBin(
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): SluiceCommand {
  const child = spawn(SLUICE_BIN, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: sluiceEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = outputCollector();
  const err = outputCollector();
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => out.add(chunk));
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => err.add(chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    }),
  );
  return { child, stdout: out.text, stderr: err.text, exited };
}

/** Runs the `sluice` bin to its end: its exit code and output, whatever the code. */
export async function runSluiceBin(
  args: string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const command = spawnSluiceBin(args, options);
  const { code } = await command.exited;
  return { code, stdout: command.stdout(), stderr: command.stderr() };
}
