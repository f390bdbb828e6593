/**
 * Builds Lambda functions' bundles the way the stack does (`SLUICE_ESBUILD_OPTIONS`), many in one
 * esbuild run: modules shared by the entries (the AWS SDK, zod, core) are read and parsed once
 * instead of once per function, as CDK's `NodejsFunction` does. For the bundling test and the
 * cold-start bench.
 */
import { join } from "node:path";
import { build, type Metafile } from "esbuild";
import {
  type AwsImports,
  esbuildConditions,
  PROJECT_ROOT,
  SLUICE_ESBUILD_OPTIONS,
} from "../../lib/constructs/sluice-function.ts";

export interface FunctionToBundle {
  /** Entry module, relative to the repository root. */
  readonly entry: string;
  /** Imports left out of the bundle. */
  readonly external: readonly string[];
  /** What a route file's AWS imports are (`SluiceFunctionProps.awsImports`). @default "none" */
  readonly awsImports?: AwsImports;
}

export interface BuiltBundle {
  /** The folder holding `index.mjs` and `index.mjs.map`, as in a function's asset. */
  readonly dir: string;
  /** The AWS SDK packages whose code is in the bundle (`@aws-sdk/client-dynamodb`, ...), sorted. */
  readonly sdkPackages: readonly string[];
  /** Imports the bundle leaves to the runtime. */
  readonly externalImports: readonly string[];
  /** Those of them made by an `import` statement (loaded with the bundle, as ES modules). */
  readonly staticExternalImports: readonly string[];
  /** Every module whose code is in the bundle, as esbuild names it (relative to the repository root). */
  readonly inputs: readonly string[];
}

const SDK_PACKAGE = /(?:^|\/)node_modules\/(@aws-sdk\/[^/]+)\//;

/** Where {@link bundleFunctions} puts the bundle of `entry` under `outdir`. */
const folderOf = (entry: string) => entry.replace(/\.[cm]?[jt]s$/, "");

/**
 * One bundle per distinct entry, in one esbuild run per external list and `awsImports`, under
 * `outdir`. Keyed by entry.
 */
export async function bundleFunctions(
  functions: readonly FunctionToBundle[],
  outdir: string,
): Promise<Map<string, BuiltBundle>> {
  const byOptions = new Map<string, Set<string>>();
  for (const fn of functions) {
    const key = JSON.stringify([[...fn.external].sort(), fn.awsImports ?? "none"]);
    byOptions.set(key, (byOptions.get(key) ?? new Set()).add(fn.entry));
  }
  const bundles = new Map<string, BuiltBundle>();
  for (const [key, entries] of byOptions) {
    const [external, awsImports] = JSON.parse(key) as [string[], AwsImports];
    const result = await build({
      ...SLUICE_ESBUILD_OPTIONS,
      mainFields: [...SLUICE_ESBUILD_OPTIONS.mainFields],
      inject: [...SLUICE_ESBUILD_OPTIONS.inject],
      conditions: esbuildConditions(awsImports),
      entryPoints: Object.fromEntries(
        [...entries].map((entry) => [`${folderOf(entry)}/index`, join(PROJECT_ROOT, entry)]),
      ),
      outdir,
      outExtension: { ".js": ".mjs" },
      absWorkingDir: PROJECT_ROOT,
      bundle: true,
      external,
      metafile: true,
      logLevel: "error",
    });
    for (const entry of entries) {
      const dir = join(outdir, folderOf(entry));
      const output = outputOf(result.metafile, join(dir, "index.mjs"));
      bundles.set(entry, {
        dir,
        sdkPackages: [
          ...new Set(Object.keys(output.inputs).flatMap((input) => SDK_PACKAGE.exec(input)?.[1] ?? [])),
        ].sort(),
        externalImports: [...new Set(output.imports.filter((i) => i.external).map((i) => i.path))].sort(),
        staticExternalImports: [
          ...new Set(output.imports.filter((i) => i.external && i.kind === "import-statement").map((i) => i.path)),
        ].sort(),
        inputs: Object.keys(output.inputs).sort(),
      });
    }
  }
  return bundles;
}

function outputOf(metafile: Metafile, file: string): Metafile["outputs"][string] {
  const found = Object.entries(metafile.outputs).find(([path]) => join(PROJECT_ROOT, path) === file);
  if (!found) throw new Error(`esbuild wrote no ${file}`);
  return found[1];
}
