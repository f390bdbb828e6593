import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Annotations } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { esbuildBinaryPackage } from "#config/shared-names";
import { type BundledTree, PROJECT_ROOT, SLUICE_ARCHITECTURE } from "./sluice-function.ts";

/** Lambda's platform and the architecture every Sluice function declares: the binary the functions need. */
export const LAMBDA_ESBUILD_TARGET = { platform: "linux", arch: SLUICE_ARCHITECTURE.name } as const;

/** `@esbuild/linux-arm64`: esbuild's native binary for {@link LAMBDA_ESBUILD_TARGET}. */
export const LAMBDA_ESBUILD_PACKAGE = esbuildBinaryPackage(LAMBDA_ESBUILD_TARGET);

/**
 * Where `scripts/fetch-lambda-esbuild.mjs` (run by `postinstall`) puts that package: npm installs
 * no package of another platform into `node_modules`, so it is fetched beside it.
 */
export const LAMBDA_PACKAGES_DIR = join(PROJECT_ROOT, ".lambda-packages");

/**
 * The binary package copied into a deploying function's `node_modules`, where the function looks
 * for it (functions/adapters/aws/native-esbuild.ts). Without it, or at another version than the
 * installed `esbuild`, the function bundles with esbuild-wasm, about thirty times slower: a warning
 * at synth says so and how to fetch it, rather than an error, since that function still works.
 */
export function lambdaEsbuildTree(
  scope: Construct,
  packagesDir: string = LAMBDA_PACKAGES_DIR,
): BundledTree | undefined {
  const from = join(packagesDir, LAMBDA_ESBUILD_PACKAGE);
  const wanted = versionOf(join(PROJECT_ROOT, "node_modules", "esbuild"));
  const found = versionOf(from);
  if (found === undefined || found !== wanted) {
    Annotations.of(scope).addWarningV2(
      "sluice:lambdaEsbuild",
      `${LAMBDA_ESBUILD_PACKAGE}@${wanted ?? "?"} is ${found === undefined ? "missing" : `at ${found}`} in ${packagesDir}: ` +
        "this function will bundle components with esbuild-wasm (slow); run npm run fetch:lambda-esbuild",
    );
    return undefined;
  }
  return { from, to: join("node_modules", LAMBDA_ESBUILD_PACKAGE) };
}

function versionOf(packageDir: string): string | undefined {
  const manifest = join(packageDir, "package.json");
  if (!existsSync(manifest)) return undefined;
  const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version?: unknown };
  return typeof version === "string" ? version : undefined;
}
