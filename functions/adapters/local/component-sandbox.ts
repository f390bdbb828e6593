/**
 * Reads a component's metadata without evaluating its code in this process (DESIGN.md decisions 2
 * and 3): the code is bundled with esbuild, then evaluated in a short-lived sandbox child
 * (`sandbox-process.ts`) that is killed as soon as it has answered.
 */
import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";
import type { ComponentDescription } from "#runtime/describe-component";
import { type DescribedMessage, type DescribeRequest, withPosition } from "#runtime/sandbox-protocol";
import { bundleComponent, invalidCode, sandboxEntry, sha256 } from "./sandbox-bundle.ts";
import { crashReason, forkSandbox, isRunning } from "./sandbox-process.ts";

/** Options of {@link describeComponentInSandbox}. */
export interface ComponentSandboxOptions {
  /** Where bundles are written (`describe/<sha256 of code>/`, plus `runtime/`). */
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
  /** esbuild plugins that inline npm packages; without them packages stay external. */
  readonly esbuildPlugins?: readonly Plugin[];
}

const BUNDLE_FILE = "component.mjs";

/** The folder `describeComponentInSandbox` bundles into, below the work dir. */
export const DESCRIBE_DIR = "describe";

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
    bundleComponent(code, join(options.workDir, DESCRIBE_DIR, sha256(code), BUNDLE_FILE), options.esbuildPlugins),
  ]);
  const reply = await describeInChild(entryPath, bundlePath, options.timeoutMs ?? 5000, options.heapMb ?? 128);
  if (reply.ok) return reply.description;
  throw invalidCode(withPosition(reply.error));
}

/** Forks the sandbox, sends one request, and returns its one reply. The child never outlives this. */
function describeInChild(
  entryPath: string,
  bundlePath: string,
  timeoutMs: number,
  heapMb: number,
): Promise<DescribedMessage> {
  const { child, stderrTail } = forkSandbox(entryPath, `${dirname(bundlePath)}/`, heapMb);
  const request: DescribeRequest = { type: "describe", requestId: "describe", bundlePath };

  return new Promise<DescribedMessage>((resolve, reject) => {
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
      () => finish(() => reject(invalidCode(`loading the component took longer than ${timeoutMs / 1000}s`))),
      timeoutMs,
    );
    child.on("message", (message: { type?: unknown } | null) => {
      if (message?.type === "ready") {
        child.send(request, (error) => {
          if (error) finish(() => reject(invalidCode(`the component could not be loaded: ${error.message}`)));
        });
      } else if (message?.type === "described") {
        finish(() => resolve(message as DescribedMessage));
      }
    });
    child.once("error", (error) => finish(() => reject(error)));
    child.once("exit", (code, signal) =>
      finish(() =>
        reject(invalidCode(`the component could not be loaded: ${crashReason(code, signal, stderrTail())}`)),
      ),
    );
  });
}
