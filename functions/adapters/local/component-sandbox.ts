/**
 * Reads a component's metadata without evaluating its code in this process (DESIGN.md decisions 2
 * and 3): the code is bundled with esbuild, then evaluated in a short-lived sandbox child
 * (`sandbox-process.ts`) that is killed as soon as it has answered.
 */
import { join } from "node:path";
import type { Plugin } from "esbuild";
import { invalidCode } from "#adapters/component-compile-error";
import { sha256Hex } from "#core/sha256";
import type { ComponentDescription } from "#runtime/describe-component";
import { withPosition } from "#runtime/sandbox-channel";
import { BUNDLE_FILE, bundleComponent, sandboxEntry } from "./sandbox-bundle.ts";
import { describeInSandbox } from "./sandbox-process.ts";

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
    bundleComponent(code, join(options.workDir, DESCRIBE_DIR, sha256Hex(code), BUNDLE_FILE), options.esbuildPlugins),
  ]);
  const reply = await describeInSandbox(entryPath, bundlePath, {
    timeoutMs: options.timeoutMs ?? 5000,
    heapMb: options.heapMb ?? 128,
  });
  if (reply.ok) return reply.description;
  throw invalidCode(withPosition(reply.error));
}
