/**
 * Sluice's stacks deployed into moto and served offline (docs/aws.md, "The offline deployment
 * test"): the templates of `cdk synth` with the transform of `templates.ts`, the functions' own
 * bundles run on Node 22 by the local Lambda, the HTTP API played from the template's routes.
 */

import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateScheduleGroupCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { type CfnElement, Stack } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { ENV } from "#config/env";
import { routes as manifest } from "#http/routes";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import { node22 } from "../support/node22.ts";
import { type Gateway, routesOf, startGateway } from "./gateway.ts";
import { type LocalLambda, startLocalLambda } from "./local-lambda.ts";
import {
  type DeployedStack,
  deployStacks,
  MOTO_ACCOUNT,
  MOTO_CREDENTIALS,
  MOTO_REGION,
  type Moto,
  startMoto,
} from "./moto.ts";
import { type PlayedTriggers, playTriggers } from "./played-triggers.ts";
import {
  type CfnTemplate,
  offlineTemplate,
  SERVICE_STACK,
  type SluiceApp,
  STATEFUL_STACK,
  synthSluice,
  templateOf,
} from "./templates.ts";

/**
 * The routes whose functions are bundled (bundling all 50 takes minutes on a loaded machine);
 * every other route is deployed and routed all the same, and invoking it fails, naming it.
 */
export const BUNDLED_ROUTES = [
  "get-me",
  "get-openapi",
  "create-source",
  "get-source",
  "list-source-events",
  "create-webhook",
  "create-subscription",
];

/** The Node.js 22 binary the functions run on (test/support/node22.ts). */
export { node22 };

export interface OfflineStack {
  moto: Moto;
  lambda: LocalLambda;
  gateway: Gateway;
  /** The rules' Lambda targets and the SQS mappings, played from what moto holds. */
  triggers: PlayedTriggers;
  /** The templates as synthesized, before the transform. */
  synthesized: { stateful: CfnTemplate; service: CfnTemplate };
  /** The unbundled app whose templates were deployed. */
  app: SluiceApp;
  deployed: Record<string, DeployedStack>;
  /** The name (physical id) moto gave a construct's resource of the service stack. */
  physicalIdOf(construct: IConstruct): string;
  /** What the functions' output said, for a failing test's message. */
  logs: string[];
  close(): Promise<void>;
}

export interface OfflineStackOptions {
  /** Routes bundled besides {@link BUNDLED_ROUTES}, by name. */
  moreRoutes?: readonly string[];
  /** Functions keep their processes between invocations, as Lambda's warm environments (`LocalLambdaOptions.warm`). */
  warm?: boolean;
  /** With `warm`: Node options of every function's environments (`--cpu-prof`, say). */
  warmNodeArgs?: readonly string[];
  /** Deployed with `-c npmRegistry=<url>`: where the deploying functions install packages from. */
  npmRegistry?: string;
  /**
   * The bundles of the functions that bundle components also get this machine's native esbuild
   * binary (`@esbuild/<platform>-<arch>` of node_modules) beside the shipped `linux-arm64` one, so
   * that they bundle natively here, as they do on Lambda, rather than with esbuild-wasm.
   */
  hostEsbuild?: boolean;
  /**
   * The bundles run from a folder outside the project, as on Lambda where no `node_modules` lies
   * above `/var/task`: a package's optional `require` of a package that is not in the bundle
   * (`debug`'s `supports-color`) then finds nothing, instead of the project's copy, which the
   * component bundler refuses to read. @default false: inside the project's `cdk.out`
   */
  bundlesOutsideProject?: boolean;
}

export async function startOfflineStack(options: OfflineStackOptions = {}): Promise<OfflineStack> {
  const node = node22();
  const work = mkdtempSync(join(tmpdir(), "sluice-aws-offline-"));
  const npmRegistry = options.npmRegistry ? { npmRegistry: options.npmRegistry } : {};
  const bundledRoutes = [...BUNDLED_ROUTES, ...(options.moreRoutes ?? [])];
  // The templates deployed: every route, no bundling (the assets' hashes are all that differs).
  const app = synthSluice({ outdir: join(work, "cdk.out"), bundle: false, ...npmRegistry });
  const synthesized = { stateful: templateOf(app.stateful), service: templateOf(app.service) };
  // The bundles run: inside the project (cdk.out is ignored by git), so that their external
  // imports resolve from node_modules as they would from the runtime.
  mkdirSync(join(PROJECT_ROOT, "cdk.out"), { recursive: true });
  const bundleOut = options.bundlesOutsideProject
    ? join(work, "bundles")
    : mkdtempSync(join(PROJECT_ROOT, "cdk.out", "aws-offline-"));
  const bundled = synthSluice({
    outdir: bundleOut,
    bundle: true,
    routes: manifest.filter((route) => bundledRoutes.includes(route.name)),
    ...npmRegistry,
  });
  const bundledTemplate = templateOf(bundled.service);
  if (options.hostEsbuild) addHostEsbuild(bundleOut);

  const logs: string[] = [];
  let lambda: LocalLambda | undefined;
  const moto = await startMoto();
  // What started is stopped again when a later step fails (the test's afterAll gets nothing).
  const started: (() => unknown)[] = [() => moto.close()];
  const stopStarted = async () => {
    for (const stop of started.reverse()) await stop();
    rmSync(work, { recursive: true, force: true });
    rmSync(bundleOut, { recursive: true, force: true });
  };
  try {
    return await serveOffline();
  } catch (error) {
    await stopStarted();
    throw error;
  }

  async function serveOffline(): Promise<OfflineStack> {
    const gateway = await startGateway(() => {
      if (!lambda) throw new Error("the local Lambda is not started");
      return lambda;
    });
    started.push(() => gateway.close());
    const endpoints = {
      apiEndpoint: gateway.endpoint,
      // The live stream's function URL is not played: no test streams.
      functionUrl: "http://127.0.0.1:9/",
      sqsEndpoint: moto.endpoint,
      region: MOTO_REGION,
      account: MOTO_ACCOUNT,
    };
    const deployed = await deployStacks(moto, work, {
      [STATEFUL_STACK]: offlineTemplate(synthesized.stateful, endpoints),
      [SERVICE_STACK]: offlineTemplate(synthesized.service, endpoints),
    });
    const service = deployed[SERVICE_STACK];
    if (service?.status !== "CREATE_COMPLETE") {
      const failed = Object.values(deployed).flatMap((stack) =>
        stack.resources.filter((r) => r.status !== "CREATE_COMPLETE"),
      );
      throw new Error(`deploy failed: ${JSON.stringify(failed.slice(0, 5))}`);
    }
    const namesByLogicalId = new Map(service.resources.map((resource) => [resource.logicalId, resource.physicalId]));

    const assetDir = (resource: CfnTemplate["Resources"][string] | undefined, property: "Code" | "Content") => {
      const key = (resource?.Properties?.[property] as { S3Key?: string } | undefined)?.S3Key;
      return key ? join(bundleOut, `asset.${key.replace(/\.zip$/, "")}`) : undefined;
    };
    const bundles = new Map<string, string>();
    for (const [logicalId, resource] of Object.entries(bundledTemplate.Resources)) {
      if (resource.Type !== "AWS::Lambda::Function") continue;
      const name = namesByLogicalId.get(logicalId);
      const dir = assetDir(resource, "Code");
      if (name && dir) bundles.set(name, dir);
    }
    const layer = Object.values(bundledTemplate.Resources).find(
      (resource) => resource.Type === "AWS::Lambda::LayerVersion",
    );
    const layerDir = assetDir(layer, "Content");
    if (!layerDir) throw new Error("no runtime layer in the bundled template");

    lambda = await startLocalLambda({
      moto: moto.endpoint,
      node,
      workDir: work,
      bundles,
      layerDir,
      log: (line) => logs.push(line),
      // The webhook receiver listens on 127.0.0.1, which the deliverer refuses unless told: the
      // one setting the harness adds to what the stack deploys (never set by the stack).
      env: { [ENV.webhookAllowPrivate]: "true" },
      ...(options.warm ? { warm: true } : {}),
      ...(options.warmNodeArgs ? { warmNodeArgs: options.warmNodeArgs } : {}),
    });
    started.push(() => lambda?.close());

    // Played from the template: the schedule group (moto's Scheduler API has it, its CloudFormation not).
    const scheduler = new SchedulerClient({
      endpoint: moto.endpoint,
      region: MOTO_REGION,
      credentials: MOTO_CREDENTIALS,
    });
    for (const group of Object.values(synthesized.service.Resources).filter(
      (r) => r.Type === "AWS::Scheduler::ScheduleGroup",
    )) {
      await scheduler.send(new CreateScheduleGroupCommand({ Name: group.Properties?.Name as string }));
    }
    scheduler.destroy();
    gateway.serve(routesOf(synthesized.service, namesByLogicalId));
    const buses = Object.values(synthesized.service.Resources)
      .filter((resource) => resource.Type === "AWS::Events::EventBus")
      .map((resource) => resource.Properties?.Name as string);
    const triggers = await playTriggers(moto.endpoint, lambda, buses);
    started.push(() => triggers.close());

    return {
      moto,
      lambda,
      gateway,
      triggers,
      synthesized,
      app,
      deployed,
      physicalIdOf(construct) {
        const logicalId = Stack.of(construct).getLogicalId(construct.node.defaultChild as CfnElement);
        const name = namesByLogicalId.get(logicalId);
        if (!name) throw new Error(`${logicalId} was not deployed`);
        return name;
      },
      logs,
      async close() {
        await triggers.close();
        await lambda?.idle();
        await stopStarted();
      },
    };
  }
}

/** Copies this machine's esbuild binary package next to each asset's shipped `@esbuild/linux-arm64`. */
function addHostEsbuild(bundleOut: string): void {
  const hostPackage = `${process.platform}-${process.arch}`;
  const from = join(PROJECT_ROOT, "node_modules", "@esbuild", hostPackage);
  if (!existsSync(from)) throw new Error(`no @esbuild/${hostPackage} in node_modules`);
  for (const asset of readdirSync(bundleOut)) {
    const esbuilds = join(bundleOut, asset, "node_modules", "@esbuild");
    if (existsSync(join(esbuilds, "linux-arm64")) && !existsSync(join(esbuilds, hostPackage)))
      cpSync(from, join(esbuilds, hostPackage), { recursive: true });
  }
}
