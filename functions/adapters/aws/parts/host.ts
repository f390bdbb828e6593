import { tmpdir } from "node:os";
import { join } from "node:path";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { bundledNpmCli } from "#adapters/npm/npm-cli";
import { NPM_HOME_FOLDER } from "#adapters/npm/package-cache";
import type { AwsPart } from "../composition.ts";
import { LambdaComponentHost } from "../lambda-component-host.ts";
import { LambdaDeployFinisher } from "../lambda-deploy-finisher.ts";
import { lazy } from "../lazy-ports.ts";
import { loadLambdaEsbuild } from "../native-esbuild.ts";
import { componentBundler } from "../source-bundle.ts";

/**
 * The component host (Lambda): functions that run sources, and, deployed with the settings to
 * describe or create them (`access.compute` routes, by level), bundle and deploy them.
 */
export const part: AwsPart = {
  name: "host",
  build({ compute, log, taskRoot, client, shared }) {
    const npmCache = join(tmpdir(), "sluice-npm");
    const finisher = compute.deployFinisherFunction;
    return {
      // Deploying routes hand what their time cannot hold to the deploy finisher.
      ...(finisher
        ? {
            deployFinisher: lazy(
              "the deploy finisher",
              () =>
                new LambdaDeployFinisher({
                  lambda: client("lambda", () => new LambdaClient({})),
                  functionName: finisher,
                }),
            ),
          }
        : {}),
      host: lazy(
        "the component host",
        () =>
          new LambdaComponentHost({
            lambda: client("lambda", () => new LambdaClient({})),
            stage: compute.stage,
            invocationTimeoutMs: compute.runtime.invocationTimeoutMs,
            log,
            ...(compute.describerFunction
              ? {
                  deploy: {
                    describerFunction: compute.describerFunction,
                    ...(compute.functions
                      ? {
                          functions: {
                            sourceRoleArn: compute.functions.sourceRoleArn,
                            runtimeLayerArn: compute.functions.runtimeLayerArn,
                            logGroup: compute.functions.sourceLogGroup,
                          },
                        }
                      : {}),
                    bundle: componentBundler({
                      // The native binary shipped for the function's architecture, else esbuild-wasm.
                      esbuild: () =>
                        loadLambdaEsbuild(join(taskRoot, "node_modules"), log, {
                          scratchDir: join(tmpdir(), "sluice-esbuild"),
                        }),
                      plugins: [
                        npmPackagesPlugin({
                          shippedPackagesDir: join(taskRoot, "node_modules"),
                          // Lambda has no npm of its own: the bundled CLI installs under /tmp.
                          cacheDir: npmCache,
                          npmCli: bundledNpmCli(join(taskRoot, "node_modules")),
                          npmHome: join(npmCache, NPM_HOME_FOLDER),
                          // A failure names the package before the API's 30 s limit.
                          installTimeoutMs: 20_000,
                          // The deploying functions' "trees" part: an install happens once per resolved set.
                          ...(shared.installedTrees ? { installedTrees: shared.installedTrees } : {}),
                          ...(compute.npmRegistry ? { registry: compute.npmRegistry } : {}),
                        }),
                      ],
                    }),
                  },
                }
              : {}),
          }),
      ),
    };
  },
};
