/**
 * Reads a component's metadata without evaluating its code in this process (DESIGN.md decisions 2
 * and 3): the code is bundled with esbuild, then evaluated in a child process under Node's
 * permission model (read access to two folders, no writes, no child processes, no workers, no
 * addons), with an empty environment, a heap cap and a time limit.
 *
 * Not covered: Node 20's permission model has no network restriction, so a component can still
 * open sockets while it loads. npm packages are left external and so cannot be loaded yet.
 */
import { fork } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Message } from "esbuild";
import { DomainError } from "#core/errors";
import type { ComponentDescription } from "../../../runtime-layer/describe-component.ts";
import type { DescribeReply, DescribeRequest, LoadFailure } from "../../../runtime-layer/sandbox-entry.ts";

/** Options of {@link describeComponentInSandbox}. */
export interface ComponentSandboxOptions {
  /** Where bundles are written (one content-addressed folder per code, plus `runtime/`). */
  readonly workDir: string;
  /**
   * How long the child may take to start, evaluate the module and answer.
   * @default 5000
   */
  readonly timeoutMs?: number;
  /**
   * V8 old-space cap of the child, in MiB.
   * @default 128
   */
  readonly heapMb?: number;
}

const FIELD = "component_code";
const BUNDLE_FILE = "component.mjs";
const RUNTIME_LAYER = fileURLToPath(new URL("../../../runtime-layer/", import.meta.url));
/** Bytes of the child's stderr kept to explain a crash (an OOM report is a few hundred). */
const STDERR_TAIL = 4096;

const invalidCode = (message: string) =>
  new DomainError("validation", `${FIELD}: ${message}`, [{ field: FIELD, message }]);

/**
 * Evaluates `code` (a component module: ESM or CommonJS, JavaScript or TypeScript) in a sandbox
 * child process and returns its metadata.
 *
 * @throws DomainError `validation` (field `component_code`) when the code does not compile, throws
 * while loading, takes longer than `timeoutMs`, or kills its process (out of memory, ...).
 */
export async function describeComponentInSandbox(
  code: string,
  options: ComponentSandboxOptions,
): Promise<ComponentDescription> {
  const [entryPath, bundlePath] = await Promise.all([
    sandboxEntry(options.workDir),
    bundleComponent(code, options.workDir),
  ]);
  const reply = await runInChild(entryPath, bundlePath, options.timeoutMs ?? 5000, options.heapMb ?? 128);
  if (reply.ok) return reply.description;
  throw invalidCode(withPosition(reply.error));
}

function withPosition(failure: LoadFailure): string {
  if (failure.line === undefined) return failure.message;
  return `${failure.message} (line ${failure.line}${failure.column === undefined ? "" : `, column ${failure.column}`})`;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * Bundles the user's code into `<workDir>/<sha256 of code>/component.mjs`. The same code always
 * lands in the same folder, so a second describe of it skips esbuild.
 */
async function bundleComponent(code: string, workDir: string): Promise<string> {
  const outfile = join(workDir, sha256(code), BUNDLE_FILE);
  if (existsSync(outfile)) return outfile;
  try {
    await build({
      // The ts loader also takes plain JS. A CommonJS entry needs no wrapper: esbuild's ESM output
      // of a CommonJS entry is `export default require_component()`, i.e. `module.exports`.
      stdin: { contents: code, loader: "ts", resolveDir: workDir, sourcefile: "component.ts" },
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      // npm packages come in a later step; node: built-ins are always external on platform node.
      packages: "external",
      // Inline so the child, which may read only this folder, maps stack frames to the user's lines.
      sourcemap: "inline",
      // esbuild's ESM output has no `require`; CommonJS components call it for built-ins.
      banner: {
        js: 'import { createRequire as __sluiceCreateRequire } from "node:module"; const require = __sluiceCreateRequire(import.meta.url);',
      },
      outfile: `${outfile}.${process.pid}.tmp`,
      write: true,
      logLevel: "silent",
    });
  } catch (error) {
    throw compileError(error);
  }
  // Renamed into place so a concurrent describe never imports a half-written bundle.
  await rename(`${outfile}.${process.pid}.tmp`, outfile);
  return outfile;
}

function compileError(error: unknown): unknown {
  const errors = (error as { errors?: Message[] }).errors;
  const first = errors?.[0];
  if (!first) return error;
  const where = first.location ? ` (line ${first.location.line}, column ${first.location.column + 1})` : "";
  return invalidCode(`${first.text}${where}`);
}

/** The entry bundle of each work dir, built on first use in this process. */
const entryBundles = new Map<string, Promise<string>>();

/**
 * Bundles `runtime-layer/sandbox-entry.ts` into `<workDir>/runtime/sandbox-entry.mjs` once per
 * process (always afresh, so a new Sluice version never runs an old entry), so the child runs
 * plain JS without tsx and can read nothing but that one folder.
 */
function sandboxEntry(workDir: string): Promise<string> {
  let entry = entryBundles.get(workDir);
  if (!entry) {
    entry = buildEntry(workDir);
    entryBundles.set(workDir, entry);
    entry.catch(() => entryBundles.delete(workDir));
  }
  return entry;
}

async function buildEntry(workDir: string): Promise<string> {
  const outfile = join(workDir, "runtime", "sandbox-entry.mjs");
  const result = await build({
    entryPoints: [join(RUNTIME_LAYER, "sandbox-entry.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    write: false,
    logLevel: "silent",
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error("esbuild produced no sandbox entry");
  await mkdir(dirname(outfile), { recursive: true });
  const temporary = `${outfile}.${process.pid}.tmp`;
  await writeFile(temporary, output.contents);
  await rename(temporary, outfile);
  return outfile;
}

/** Forks the sandbox, sends one request, and returns its one reply. The child never outlives this. */
function runInChild(entryPath: string, bundlePath: string, timeoutMs: number, heapMb: number): Promise<DescribeReply> {
  const child = fork(entryPath, [], {
    execArgv: [
      "--experimental-permission",
      `--allow-fs-read=${dirname(entryPath)}`,
      `--allow-fs-read=${dirname(bundlePath)}`,
      "--disable-warning=ExperimentalWarning",
      "--enable-source-maps",
      `--max-old-space-size=${heapMb}`,
    ],
    env: {},
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    serialization: "json",
  });
  let stderr = "";
  // Drained so a chatty component cannot block on a full pipe; stderr's tail explains crashes.
  child.stdout?.resume();
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL);
  });

  return new Promise<DescribeReply>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // SIGKILL, not SIGTERM: user code may have installed a SIGTERM handler while loading.
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      outcome();
    };
    const timer = setTimeout(
      () => finish(() => reject(invalidCode(`loading the component took longer than ${timeoutMs / 1000}s`))),
      timeoutMs,
    );
    child.once("message", (message) => finish(() => resolve(message as DescribeReply)));
    child.once("error", (error) => finish(() => reject(error)));
    child.once("exit", (code, signal) =>
      finish(() => reject(invalidCode(`the component could not be loaded: ${crashReason(code, signal, stderr)}`))),
    );
    const request: DescribeRequest = { kind: "describe", bundlePath };
    child.send(request, (error) => {
      if (error) finish(() => reject(invalidCode(`the component could not be loaded: ${error.message}`)));
    });
  });
}

function crashReason(code: number | null, signal: NodeJS.Signals | null, stderr: string): string {
  const how = signal ? `its process was killed by ${signal}` : `its process exited with code ${code}`;
  if (/heap out of memory|Allocation failed/i.test(stderr)) return `${how} (out of memory)`;
  const lastLine = stderr.trim().split("\n").at(-1);
  return lastLine ? `${how}: ${lastLine}` : how;
}
