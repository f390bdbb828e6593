/**
 * The composition root on AWS, assembled from parts (`parts/*.ts`): each part builds the ports of
 * one kind of AWS access (the table's stores, the component host, the secrets key, ...) and is the
 * only module that imports that access's SDK client. A function's entry names the parts it was
 * deployed for, each as a dynamic import, so esbuild bundles those parts and their SDK clients and
 * no others, and a cold start loads only them (docs/aws.md "Cold starts"). This module imports no
 * SDK client.
 */
import { join } from "node:path";
import { bundledAppCatalog } from "#adapters/app-catalog-files";
import { streamLogger } from "#adapters/log-output";
import { NodeHttpProviderClient } from "#adapters/node-http-provider-client";
import type { InstalledTreeStore } from "#adapters/npm/installed-trees";
import { registryFiles } from "#adapters/registry-files";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import { type AwsComputeConfig, loadAwsComputeConfig } from "#config/aws-compute-env";
import { type AwsConfig, loadAwsConfig } from "#config/env";
import { REGISTRY_DIR_ASSET } from "#config/shared-names";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import type { Logger } from "#core/ports/logger";
import { lazy, required } from "./lazy-ports.ts";

/** The parts, named by what the function may do on AWS; the stack grants the same (lib/). */
export const AWS_PART_NAMES = [
  "tables",
  "host",
  "runs",
  "timers",
  "purger",
  "secrets",
  "bus",
  "deliveries",
  "objects",
  "files",
  "delays",
  "pauses",
  "trees",
] as const;
export type AwsPartName = (typeof AWS_PART_NAMES)[number];

/** What a part builds its ports from. */
export interface AwsPartContext {
  readonly config: AwsConfig;
  readonly compute: AwsComputeConfig;
  readonly log: Logger;
  /** Where the function's bundle and the folders copied next to it (`registry/`, `node_modules/`) are. */
  readonly taskRoot: string;
  /** The resources table's name; throws when the function was deployed without table access. */
  table(): string;
  /** The SDK client of `kind`, made once per composition and shared by the parts that use it. */
  client<T>(kind: string, make: () => T): T;
  /** What the function's parts give other parts (see {@link AwsPart.share}); filled before any part builds. */
  readonly shared: Partial<AwsShared>;
}

/**
 * Adapters one part makes for another, which are not ports of core: the "trees" part's store of
 * installed npm trees, which the "host" part's bundler uses. A part of its own, so that only the
 * functions that install packages load the S3 client (decision 359).
 */
export interface AwsShared {
  readonly installedTrees: InstalledTreeStore;
}

/** One part: the ports it builds. Ports are built lazily (`lazy` in lazy-ports.ts). */
export interface AwsPart {
  readonly name: AwsPartName;
  build(context: AwsPartContext): Partial<Deps>;
  /** What it gives the other parts of the function, before they build. */
  share?(context: AwsPartContext): Partial<AwsShared>;
}

/** A function's parts, each loaded by a dynamic import (so that the bundle has it and no other). */
export type AwsPartLoaders = Readonly<Partial<Record<AwsPartName, () => Promise<{ readonly part: AwsPart }>>>>;

/** The ports some part provides, and the name each is reported by when no part of the function does. */
const PART_PORTS = {
  identity: "tables",
  usage: "tables",
  components: "tables",
  sources: "tables",
  workflows: "tables",
  workflowRuns: "tables",
  events: "tables",
  subscriptions: "tables",
  deadLetters: "tables",
  dataStores: "tables",
  appAccounts: "tables",
  runLock: "tables",
  host: "host",
  runs: "runs",
  timers: "timers",
  purger: "purger",
  secrets: "secrets",
  deliveries: "deliveries",
  objects: "objects",
  files: "files",
  delayedEmits: "delays",
  pausedRuns: "pauses",
} as const satisfies Partial<Record<keyof Deps, AwsPartName>>;

/** A port of a part the function was not bundled with: any use fails, naming the part. */
function unavailable<T extends object>(port: string, part: AwsPartName): T {
  return lazy(port, () => {
    throw new Error(`this function was bundled without the "${part}" part (its entry names the parts it uses)`);
  });
}

let deps: Promise<Deps> | undefined;

/**
 * The composition of this Lambda container, from the parts of its entry: loaded and built on the
 * first invocation, then reused (configuration is read and validated then, and SDK clients are
 * kept). A failure (a setting missing) is not kept: the next invocation tries again.
 */
export async function loadAwsDeps(
  parts: AwsPartLoaders,
  env: Record<string, string | undefined> = process.env,
): Promise<Deps> {
  deps ??= loadParts(parts).then((loaded) => buildAwsDeps(loaded, env));
  try {
    return await deps;
  } catch (error) {
    deps = undefined;
    throw error;
  }
}

/** The parts of `loaders`, each checked to be the part it is named after. */
export async function loadParts(loaders: AwsPartLoaders): Promise<AwsPart[]> {
  return Promise.all(
    Object.entries(loaders).map(async ([name, load]) => {
      const { part } = await (load as () => Promise<{ part: AwsPart }>)();
      if (part.name !== name) throw new Error(`the part loaded as "${name}" is the "${part.name}" part`);
      return part;
    }),
  );
}

/** A new composition of `parts` from `env`, not kept: {@link loadAwsDeps} keeps the first one of a container. */
export function buildAwsDeps(parts: readonly AwsPart[], env: Record<string, string | undefined>): Deps {
  const names = new Set(parts.map((part) => part.name));
  // Only functions with the table's part are deployed with its name (and a grant).
  const config = loadAwsConfig(env, { resources: names.has("tables") });
  const compute = loadAwsComputeConfig(env);
  const log = streamLogger({
    level: config.logLevel,
    format: "json",
    base: { function: env.AWS_LAMBDA_FUNCTION_NAME },
  });
  const clients = new Map<string, unknown>();
  // The compute routes' bundles carry `registry/` and the shipped npm packages' `node_modules/`
  // next to their entry (lib/constructs/api-route-function.ts).
  const taskRoot = env.LAMBDA_TASK_ROOT ?? process.cwd();
  const shared: Partial<AwsShared> = {};
  const context: AwsPartContext = {
    config,
    compute,
    log,
    taskRoot,
    shared,
    table: () => required(config.resourcesTable, "the resources table", "table access"),
    client<T>(kind: string, make: () => T): T {
      if (!clients.has(kind)) clients.set(kind, make());
      return clients.get(kind) as T;
    },
  };
  for (const part of parts) Object.assign(shared, part.share?.(context));
  const missing = Object.fromEntries(
    Object.entries(PART_PORTS)
      .filter(([, part]) => !names.has(part))
      .map(([port, part]) => [port, unavailable(`the ${port} port`, part)]),
  );
  return {
    ...(missing as Pick<Deps, keyof typeof PART_PORTS>),
    // Functions that append events publish them (the "bus" part); no listener lives in a Lambda
    // container (the live stream polls the store), so the others need no bus.
    bus: { publish: async () => {} },
    ...Object.assign({}, ...parts.map((part) => part.build(context))),
    // Deployed, Sluice never fetches from private, loopback or metadata addresses for a user.
    fetcher: new UrlCodeFetcher({ allowPrivateAddresses: false }),
    // The bundle's copy of the shipped apps and the operator's apps file (`-c appsFile`).
    apps: bundledAppCatalog(taskRoot),
    // Token endpoints and test requests: no private address either, and no SDK client to bundle.
    providers: new NodeHttpProviderClient({ allowPrivateAddresses: false }),
    // The operator's registry directory (`-c registryDir`) comes first; a bundle without one
    // has no such folder, which serves nothing.
    registry: registryFiles(join(taskRoot, "registry"), join(taskRoot, REGISTRY_DIR_ASSET)),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log,
    quotas: config.quotas,
    runtime: compute.runtime,
  };
}
