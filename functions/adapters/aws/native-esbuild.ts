/**
 * Which esbuild the functions that deploy sources bundle components with on Lambda. The native
 * binary bundles a component importing `@pipedream/platform` in a fraction of a second where
 * esbuild-wasm takes about 10 s on a first bundle (docs/aws.md "Deploy time budget"), so the stack
 * ships both in the function's `node_modules`: `esbuild` (its JS API) with the binary package of
 * the architecture the stack declares (`@esbuild/linux-arm64`, lib/constructs/lambda-esbuild.ts),
 * and `esbuild-wasm`, used only when the binary is absent or does not run here.
 *
 * The choice runs the binary once (`--version`) before esbuild's JS API loads: a binary of another
 * architecture (`ENOEXEC`), one that lost its executable bit in the zip (`EACCES`) or of another
 * version (esbuild's API refuses it) then falls back to WebAssembly instead of failing every bundle.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, copyFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { esbuildBinaryPackage } from "#config/shared-names";
import type { Logger } from "#core/ports/logger";
import { type EsbuildApi, loadEsbuild } from "./source-bundle.ts";

/** The platform and architecture a binary is chosen for: the running process's by default. */
export interface EsbuildTarget {
  readonly platform: string;
  readonly arch: string;
}

/** Where that package's binary is under `nodeModules`. */
export function esbuildBinaryPath(nodeModules: string, target: EsbuildTarget): string {
  return join(nodeModules, esbuildBinaryPackage(target), "bin", "esbuild");
}

export type EsbuildChoice =
  | { readonly flavour: "native"; readonly binary: string; readonly version: string }
  | { readonly flavour: "wasm"; readonly reason: string };

/** How long the binary may take to print its version before it counts as not running. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * The esbuild to bundle with from `nodeModules` (the function's own, `<task root>/node_modules`):
 * native when the binary for `target` is there, runs, and is the version of the `esbuild` JS API
 * beside it; otherwise WebAssembly, with the reason. A binary that is there but not executable is
 * copied into `scratchDir` (when given) and run from there.
 */
export async function chooseEsbuild(
  nodeModules: string,
  target: EsbuildTarget = { platform: process.platform, arch: process.arch },
  scratchDir?: string,
): Promise<EsbuildChoice> {
  const api = join(nodeModules, "esbuild", "package.json");
  if (!existsSync(api)) return { flavour: "wasm", reason: "the esbuild package is not installed" };
  const version = (JSON.parse(readFileSync(api, "utf8")) as { version?: unknown }).version;
  const binary = esbuildBinaryPath(nodeModules, target);
  if (!existsSync(binary)) return { flavour: "wasm", reason: `${esbuildBinaryPackage(target)} is not installed` };
  let probed = await probe(binary);
  let runnable = binary;
  if ("error" in probed && probed.error === "EACCES" && scratchDir !== undefined) {
    // A zip that dropped the executable bit: a copy in /tmp, the one writable place, is made runnable.
    runnable = join(scratchDir, "esbuild");
    await mkdir(scratchDir, { recursive: true });
    await copyFile(binary, runnable);
    await chmod(runnable, 0o755);
    probed = await probe(runnable);
  }
  const name = esbuildBinaryPackage(target);
  if ("error" in probed) return { flavour: "wasm", reason: `${name} does not run here (${probed.error})` };
  if (probed.version !== version)
    return { flavour: "wasm", reason: `${name} is ${probed.version}, esbuild is ${String(version)}` };
  return { flavour: "native", binary: runnable, version: probed.version };
}

/** Runs `binary --version`: what it printed, or why it did not run. */
function probe(binary: string): Promise<{ version: string } | { error: string }> {
  return new Promise((resolve) => {
    // No environment: the probe needs none, and the function's credentials are none of its business.
    execFile(binary, ["--version"], { timeout: PROBE_TIMEOUT_MS, env: {}, encoding: "utf8" }, (error, stdout) => {
      // A spawn error names itself (`EACCES`); a program that ran and failed has an exit status.
      const code = (error as { code?: unknown } | null)?.code;
      resolve(error ? { error: typeof code === "string" ? code : `exit ${String(code)}` } : { version: stdout.trim() });
    });
  });
}

/**
 * Loads the esbuild {@link chooseEsbuild} picks. esbuild's JS API reads `ESBUILD_BINARY_PATH` when
 * its module loads, so the variable is set (to the binary just probed) before the import; the
 * process then starts that binary as its service. Logs which one it is, once per container.
 */
export async function loadLambdaEsbuild(
  nodeModules: string,
  log: Logger,
  options: { target?: EsbuildTarget; scratchDir?: string } = {},
): Promise<EsbuildApi> {
  const choice = await chooseEsbuild(nodeModules, options.target, options.scratchDir);
  if (choice.flavour === "native") {
    process.env.ESBUILD_BINARY_PATH = choice.binary;
    log.info("bundling components with native esbuild", { esbuild_binary: choice.binary, version: choice.version });
    return loadEsbuild("native");
  }
  log.warn("bundling components with esbuild-wasm, the native binary is not usable", { reason: choice.reason });
  return loadEsbuild("wasm");
}
