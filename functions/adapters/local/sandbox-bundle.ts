/**
 * esbuild steps of the local sandbox: the user's component into one self-contained file, and the
 * sandbox child's program (`runtime-layer/sandbox-entry.ts`) into plain JS, so a child runs without
 * tsx and reads nothing but two folders.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { buildComponent, withLiveService } from "#adapters/component-build";
import { EVALUATING_HOOK } from "#runtime/sandbox-channel";

/** The file name of a bundle, in the content-addressed folder its caller picks. */
export const BUNDLE_FILE = "component.mjs";

/**
 * Where a bundle's source map lies: beside it, as `<bundle>.map`. Nothing in the bundle names it,
 * so loading the bundle never reads it; the sandbox child reads it only to map a stack
 * (`runtime-layer/lazy-source-maps.ts`, which knows this name too).
 */
export const sourceMapOf = (bundlePath: string) => `${bundlePath}.map`;

/** Whether a finished bundle of this version is at `outfile`: the bundle and its map beside it. */
export const isBundled = (outfile: string) => existsSync(outfile) && existsSync(sourceMapOf(outfile));
const RUNTIME_LAYER = fileURLToPath(new URL("../../../runtime-layer/", import.meta.url));

const temporaryName = (path: string) => `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;

/**
 * Bundles `code` (a component module: ESM or CommonJS, JavaScript or TypeScript) into `outfile`,
 * its source map beside it ({@link sourceMapOf}), unless they exist. The caller picks a
 * content-addressed path, so existing files are this code's. A bundle of an earlier version, with
 * its map inline and none beside, is built again.
 *
 * Everything the code imports is inlined: npm packages through `plugins` (without plugins they
 * stay external, and fail to load in the child). Imports of files by path resolve only among a
 * multi-file component's own files (a single module may import none), and no source-map comment
 * is followed: the bundler, which runs with Sluice's rights, must not read other files on the
 * code's behalf (`component-build.ts`).
 *
 * @throws DomainError `validation` on `component_code` with esbuild's first message and its line.
 */
export async function bundleComponent(
  code: string,
  outfile: string,
  plugins: readonly esbuild.Plugin[] = [],
): Promise<string> {
  if (isBundled(outfile)) return outfile;
  // esbuild writes a relative `outfile` under its working dir (the component's folder), not ours.
  if (!isAbsolute(outfile)) return bundleComponent(code, resolve(outfile), plugins);
  const resolveDir = dirname(outfile);
  const temporary = temporaryName(outfile);
  await mkdir(resolveDir, { recursive: true });
  try {
    await buildComponent(esbuild, code, {
      resolveDir,
      plugins,
      sourceMap: "beside",
      output: {
        format: "esm",
        target: "node20",
        // node: built-ins are always external on platform node.
        ...(plugins.length === 0 ? { packages: "external" as const } : {}),
        // esbuild's ESM output has no `require`; CommonJS components call it for built-ins. Then the
        // child is told that the module's own code starts (EVALUATING_HOOK).
        banner: {
          js: `import { createRequire as __sluiceCreateRequire } from "node:module"; const require = __sluiceCreateRequire(import.meta.url); globalThis[Symbol.for("${EVALUATING_HOOK}")]?.(import.meta.url);`,
        },
        outfile: temporary,
        write: true,
      },
    });
  } catch (error) {
    await Promise.all([rm(temporary, { force: true }), rm(sourceMapOf(temporary), { force: true })]);
    throw error;
  }
  // Renamed into place, the map first, so a concurrent reader never imports a half-written
  // bundle, nor one whose map is not there yet.
  await rename(sourceMapOf(temporary), sourceMapOf(outfile));
  await rename(temporary, outfile);
  return outfile;
}

/** The program bundles of each work dir (`<workDir>/runtime/<name>.mjs`) by work dir and name, built on first use in this process. */
const programBundles = new Map<string, Promise<string>>();

const SANDBOX_ENTRY_SOURCE = join(RUNTIME_LAYER, "sandbox-entry.ts");

/**
 * Bundles `runtime-layer/sandbox-entry.ts` into `<workDir>/runtime/sandbox-entry.mjs` once per
 * process (always afresh, so a new Sluice version never runs an old entry). Every invoke calls it:
 * a map lookup once built.
 */
export function sandboxEntry(workDir: string): Promise<string> {
  return programBundle(workDir, SANDBOX_ENTRY_SOURCE, "sandbox-entry");
}

/**
 * Bundles the TypeScript program `entryPoint` (with what it imports) into plain JS at
 * `<workDir>/runtime/<name>.mjs` once per process, for a child process or a worker thread that runs
 * without tsx. A failed build is tried again on the next call.
 */
export function programBundle(workDir: string, entryPoint: string, name: string): Promise<string> {
  // Keyed without joining paths: the sandbox entry is asked for on every invoke.
  const key = `${workDir}\n${name}`;
  let bundle = programBundles.get(key);
  if (!bundle) {
    bundle = buildProgram(entryPoint, join(workDir, "runtime", `${name}.mjs`));
    programBundles.set(key, bundle);
    bundle.catch(() => programBundles.delete(key));
  }
  return bundle;
}

async function buildProgram(entryPoint: string, outfile: string): Promise<string> {
  const result = await withLiveService(esbuild, () =>
    esbuild.build({
      entryPoints: [entryPoint],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      write: false,
      logLevel: "silent",
    }),
  );
  const output = result.outputFiles[0];
  if (!output) throw new Error(`esbuild produced no bundle of ${entryPoint}`);
  await mkdir(dirname(outfile), { recursive: true });
  const temporary = temporaryName(outfile);
  await writeFile(temporary, output.contents);
  await rename(temporary, outfile);
  return outfile;
}
