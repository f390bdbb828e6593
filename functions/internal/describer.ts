/**
 * The describer function: reads a component's metadata on AWS (`LambdaComponentHost.describe`).
 * The API function that receives the code bundles it (esbuild) and invokes this function with the
 * bundle's text. Here it is written to `/tmp` and evaluated in a child process, exactly as local
 * mode does it: `runtime-layer/sandbox-entry.ts` (bundled next to this file as
 * `sandbox-entry.mjs`) under Node's permission model, read access to two folders, an empty
 * environment (so not even this function's logging-only credentials), a heap cap and a time limit.
 *
 * One child per describe, killed after its answer: this function serves every owner's code, and
 * code of different owners never shares a process (DESIGN.md decision 3).
 */
import { type ChildProcess, fork } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { crashReason } from "#adapters/local/sandbox-process";
import type { DescribeReply, DescribeRequest, SandboxMessage } from "#runtime/sandbox-protocol";

/** The event the describer takes. */
export const describeEventSchema = z.object({
  kind: z.literal("describe"),
  /** The component bundled to one ESM file (`bundleComponent` in `#adapters/aws/source-bundle`). */
  code: z.string().min(1),
});
export type DescribeEvent = z.infer<typeof describeEventSchema>;

export interface DescribeOptions {
  /** The sandbox child's program. @default `sandbox-entry.mjs` next to this module */
  readonly entryPath?: string;
  /** Where bundles are written. @default os.tmpdir() */
  readonly workDir?: string;
  /** @default 5000 */
  readonly timeoutMs?: number;
  /** V8 old-space cap of the child, in MiB. @default 128 */
  readonly heapMb?: number;
}

const BUNDLE_FILE = "component.mjs";

/** Node 22.13 renamed the flag; older Node (20 here) only knows the experimental one. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has("--permission")
  ? "--permission"
  : "--experimental-permission";

/** Evaluates a bundled component in a sandbox child and returns what it exports, described. */
export async function describeBundle(code: string, options: DescribeOptions = {}): Promise<DescribeReply> {
  const entryPath = options.entryPath ?? fileURLToPath(new URL("./sandbox-entry.mjs", import.meta.url));
  const hash = createHash("sha256").update(code).digest("hex");
  // A fresh folder per request: the child may read it, and nothing else of other requests.
  const folder = join(options.workDir ?? tmpdir(), "sluice-describe", `${hash.slice(0, 16)}-${randomUUID()}`);
  const bundlePath = join(folder, BUNDLE_FILE);
  await mkdir(folder, { recursive: true });
  try {
    await writeFile(bundlePath, code);
    return await askChild(entryPath, bundlePath, options.timeoutMs ?? 5000, options.heapMb ?? 128);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

function askChild(entryPath: string, bundlePath: string, timeoutMs: number, heapMb: number): Promise<DescribeReply> {
  const child: ChildProcess = fork(entryPath, [], {
    execArgv: [
      PERMISSION_FLAG,
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
  child.stdout?.resume();
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4096);
  });
  const requestId = randomUUID();

  return new Promise<DescribeReply>((resolve) => {
    let settled = false;
    const finish = (reply: DescribeReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // SIGKILL: the code may have installed a SIGTERM handler while loading.
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      resolve(reply);
    };
    const failed = (message: string): DescribeReply => ({ ok: false, error: { message } });
    const timer = setTimeout(
      () => finish(failed(`loading the component took longer than ${timeoutMs / 1000}s`)),
      timeoutMs,
    );
    child.on("message", (message: SandboxMessage) => {
      if (message?.type !== "described" || message.requestId !== requestId) return;
      const { type: _type, requestId: _id, ...reply } = message;
      finish(reply as DescribeReply);
    });
    child.once("error", (error) => finish(failed(`the component could not be loaded: ${error.message}`)));
    child.once("exit", (code, signal) =>
      finish(failed(`the component could not be loaded: ${crashReason(code, signal, stderr)}`)),
    );
    const request: DescribeRequest = { type: "describe", requestId, bundlePath };
    child.send(request, (error) => {
      if (error) finish(failed(`the component could not be loaded: ${error.message}`));
    });
  });
}

/**
 * Lambda entry. A malformed event is a bug of the caller and fails the invocation; whatever the
 * component does is an answer (`{ok: false, error}`), never a failure of this function.
 */
export async function handler(event: unknown): Promise<DescribeReply> {
  const { code } = describeEventSchema.parse(event);
  return describeBundle(code);
}
