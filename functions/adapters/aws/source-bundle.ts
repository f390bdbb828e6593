/**
 * The code of a deployed source's Lambda function: the component bundled with esbuild (its npm
 * packages included, through plugins), plus a three-line entry that hands it to the Sluice runtime
 * in the runtime layer. Zipped reproducibly, so the same code gives the same bytes and the same
 * `CodeSha256`, and an unchanged source is not re-uploaded.
 *
 * esbuild is passed in rather than imported: its native binary is per platform, so the API
 * functions on Lambda (arm64) use `esbuild-wasm`, local mode and tests the native `esbuild`
 * (see {@link loadEsbuild}). Only types are imported here, so bundling this file pulls in neither.
 */
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Plugin } from "esbuild";
import { zipSync } from "fflate";
import { buildComponent, type EsbuildApi } from "#adapters/component-build";

export type { EsbuildApi } from "#adapters/component-build";

/** Where a source function's entry imports the runtime from: the runtime layer, unpacked in `/opt`. */
export const RUNTIME_LAYER_MODULE = "/opt/nodejs/sluice-runtime.mjs";
/** The Lambda handler of every source function. */
export const SOURCE_HANDLER = "index.handler";
/** Bundle file of the component inside the function's zip. */
const COMPONENT_FILE = "component.mjs";
const ENTRY_FILE = "index.mjs";

/**
 * A fixed, local-time modification date for every zip entry. Local on purpose: zip stores DOS
 * dates in local time, and fflate converts with local getters, so a local date round-trips to the
 * same bytes in every time zone (a UTC date would shift by the zone).
 */
const ZIP_MTIME = new Date(2000, 0, 1, 0, 0, 0);
/** Unix mode `rw-r--r--`: Lambda must be able to read every file. */
const ZIP_FILE_ATTRS = 0o644 << 16;

/**
 * Loads esbuild without letting a bundler of this file pull it in: `native` is the `esbuild`
 * package (local mode, tests, the deployer's machine), `wasm` is `esbuild-wasm`, which the service
 * stack copies into the functions that deploy sources (a native binary built on the deployer's
 * machine would not run on Lambda's arm64).
 */
export async function loadEsbuild(flavour: "native" | "wasm"): Promise<EsbuildApi> {
  const specifier = flavour === "wasm" ? "esbuild-wasm" : "esbuild";
  const module = (await import(specifier)) as EsbuildApi & { default?: EsbuildApi };
  return typeof module.build === "function" ? module : (module.default as EsbuildApi);
}

export interface BundleComponentOptions {
  readonly esbuild: EsbuildApi;
  /** Resolve the component's npm packages (installing them as needed). @default - none */
  readonly plugins?: readonly Plugin[];
  /**
   * Folder that imports are resolved from, and that paths in the bundle are relative to.
   * @default os.tmpdir()
   */
  readonly resolveDir?: string;
}

/**
 * Bundles a component module (ESM or CommonJS, JavaScript or TypeScript) into one ESM file for
 * Node 22: npm packages inlined, a `createRequire` line so bundled `require()` of built-ins works,
 * an inline source map (mappings only) so errors name the user's `component.ts` lines. Reads no
 * file but the npm packages the code imports, whatever comments it carries (`component-build.ts`).
 *
 * @throws DomainError `validation` on `component_code` when it does not compile or an import
 * cannot be resolved; a plugin's own DomainError (a package that cannot be installed) as it is.
 */
export async function bundleComponent(code: string, options: BundleComponentOptions): Promise<string> {
  const resolveDir = options.resolveDir ?? tmpdir();
  const result = await buildComponent(options.esbuild, code, {
    resolveDir,
    plugins: options.plugins ?? [],
    output: {
      outfile: join(resolveDir, COMPONENT_FILE),
      format: "esm",
      target: "node22",
      mainFields: ["module", "main"],
      banner: {
        js: 'import { createRequire as __sluiceCreateRequire } from "node:module"; const require = __sluiceCreateRequire(import.meta.url);',
      },
      write: false,
    },
  });
  const output = result.outputFiles?.[0];
  if (!output) throw new Error("esbuild produced no bundle");
  return output.text;
}

export interface ComponentBundlerOptions extends Omit<BundleComponentOptions, "esbuild"> {
  /** Loads esbuild on first use, e.g. `() => loadEsbuild("wasm")`; a cold start that only runs pays nothing. */
  readonly esbuild: () => Promise<EsbuildApi>;
}

/** Bundles a warm function keeps, by code: a deploy's describe and prepare build once. */
const BUNDLES_KEPT = 16;

/**
 * `LambdaComponentHost`'s `deploy.bundle`: {@link bundleComponent} with esbuild loaded once,
 * lazily, and the bundles of the last {@link BUNDLES_KEPT} codes kept by content hash, so that one
 * deploy's describe and prepare (and a retry on a warm function) run esbuild once. A failed bundle
 * is not kept.
 */
export function componentBundler(options: ComponentBundlerOptions): (code: string) => Promise<string> {
  let esbuild: Promise<EsbuildApi> | undefined;
  const bundles = new Map<string, Promise<string>>();
  const build = async (code: string) => {
    if (!esbuild) {
      const loading = options.esbuild();
      esbuild = loading;
      // A failed load is not kept: the next bundle tries again.
      loading.catch(() => {
        if (esbuild === loading) esbuild = undefined;
      });
    }
    return bundleComponent(code, { ...options, esbuild: await esbuild });
  };
  return (code) => {
    const key = createHash("sha256").update(code).digest("hex");
    let bundle = bundles.get(key);
    if (bundle) {
      // Most recently used last: the oldest goes first when the map is full.
      bundles.delete(key);
    } else {
      bundle = build(code);
      bundle.catch(() => {
        if (bundles.get(key) === bundle) bundles.delete(key);
      });
    }
    bundles.set(key, bundle);
    if (bundles.size > BUNDLES_KEPT) bundles.delete(bundles.keys().next().value as string);
    return bundle;
  };
}

/**
 * The entry of a source function. The component is imported on the first invocation, not
 * statically: the runtime module turns on source maps when it loads, which must happen before the
 * component's file is read, and a component that throws while loading is then reported as that
 * run's error instead of failing the function's start.
 */
export function sourceEntry(runtimeModule: string = RUNTIME_LAYER_MODULE): string {
  return [
    "// Generated by Sluice: the handler of one deployed source. The runtime comes from the Sluice runtime layer.",
    `import { createSourceHandler } from ${JSON.stringify(runtimeModule)};`,
    `export const handler = createSourceHandler(() => import(${JSON.stringify(`./${COMPONENT_FILE}`)}));`,
    "",
  ].join("\n");
}

export interface SourceZip {
  zip: Uint8Array;
  /** Hex SHA-256 of `zip`. */
  sha256: string;
}

/** Zips files reproducibly: entries sorted by name, one fixed date, fixed permissions, level 9. */
export function zipReproducibly(files: Readonly<Record<string, string | Uint8Array>>): SourceZip {
  const entries: Record<string, [Uint8Array, { mtime: Date; os: number; attrs: number }]> = {};
  for (const name of Object.keys(files).sort()) {
    const content = files[name] as string | Uint8Array;
    const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
    entries[name] = [bytes, { mtime: ZIP_MTIME, os: 3, attrs: ZIP_FILE_ATTRS }];
  }
  const zip = zipSync(entries, { level: 9, mtime: ZIP_MTIME });
  return { zip, sha256: createHash("sha256").update(zip).digest("hex") };
}

/** The zip of a source function from its component bundle (see {@link bundleComponent}). */
export function sourceZip(componentBundle: string, runtimeModule: string = RUNTIME_LAYER_MODULE): SourceZip {
  return zipReproducibly({ [ENTRY_FILE]: sourceEntry(runtimeModule), [COMPONENT_FILE]: componentBundle });
}
