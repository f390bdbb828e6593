import { join } from "node:path";
import { AssetHashType, type BundlingOptions, DockerImage, type ILocalBundling } from "aws-cdk-lib";
import { type AssetCode, Code } from "aws-cdk-lib/aws-lambda";
import { buildSync } from "esbuild";
import { type AwsImports, ESM_REQUIRE_BANNER, esbuildConditions, PROJECT_ROOT } from "./sluice-function.ts";

/** Output file (relative to the asset's root) → entry module (relative to the repository root). */
export type EsbuildFiles = Readonly<Record<string, string>>;

export interface EsbuildCodeOptions {
  /** Imports left to the Lambda runtime. @default - none (everything is bundled) */
  readonly external?: readonly string[];
  /** What a route file's AWS imports are in the bundle (`SluiceFunctionProps.awsImports`). @default "none" */
  readonly awsImports?: AwsImports;
}

/**
 * Bundles each entry to one ESM file for Node 22 under `outputDir`. Used by {@link esbuildCode} at
 * synth, and by tests that run the very files the stack deploys.
 */
export function bundleLambdaFiles(files: EsbuildFiles, outputDir: string, options: EsbuildCodeOptions = {}): void {
  for (const [outfile, entry] of Object.entries(files)) {
    buildSync({
      entryPoints: [join(PROJECT_ROOT, entry)],
      outfile: join(outputDir, outfile),
      absWorkingDir: PROJECT_ROOT,
      tsconfig: join(PROJECT_ROOT, "tsconfig.json"),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node22",
      mainFields: ["module", "main"],
      conditions: esbuildConditions(options.awsImports ?? "none"),
      banner: { js: ESM_REQUIRE_BANNER },
      external: [...(options.external ?? [])],
      // Readable stack traces of Sluice's own code without shipping source maps.
      minify: false,
      logLevel: "error",
    });
  }
}

/**
 * Local bundling with esbuild's JS API. An instance, not an object literal: CDK caches staged
 * assets by the JSON of their bundling options, and the files listed here keep two assets from
 * sharing one cache entry.
 */
class LocalEsbuild implements ILocalBundling {
  constructor(
    readonly files: EsbuildFiles,
    readonly options: EsbuildCodeOptions,
  ) {}

  tryBundle(outputDir: string): boolean {
    bundleLambdaFiles(this.files, outputDir, this.options);
    return true;
  }
}

/**
 * Lambda code (for a function or a layer) made of several esbuild bundles, built at synth with the
 * esbuild in `node_modules`: no Docker (there may be no engine), and the asset hash is that of the
 * output, so an unchanged build is not uploaded again. `NodejsFunction` makes one file per function;
 * the runtime layer and the describer need their own file layout.
 */
export function esbuildCode(files: EsbuildFiles, options: EsbuildCodeOptions = {}): AssetCode {
  const bundling: BundlingOptions = {
    // Never used: local bundling always succeeds or throws. CDK requires an image all the same.
    image: DockerImage.fromRegistry("sluice/local-esbuild-only"),
    local: new LocalEsbuild(files, options),
  };
  return Code.fromAsset(PROJECT_ROOT, { assetHashType: AssetHashType.OUTPUT, bundling });
}
