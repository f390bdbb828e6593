import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { Annotations, Duration, RemovalPolicy } from "aws-cdk-lib";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Runtime } from "aws-cdk-lib/aws-lambda";
import { NodejsFunction, OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";

/** The repository root: entries, the lockfile and tsconfig.json are resolved from here. */
export const PROJECT_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Bundled ESM has no `require`; some dependencies still call it for Node built-ins, so the bundle
 * gets one made from its own URL. `node:module` is taken with `process.getBuiltinModule`, not
 * imported: importing it builds its ES module facade, which reads every export (and so loads Node's
 * source map support) at every cold start; and no import binding can clash with a bundled
 * package's own (fflate imports `createRequire` under its own name).
 */
export const ESM_REQUIRE_BANNER =
  'const require = process.getBuiltinModule("node:module").createRequire(import.meta.url);';

/**
 * What a route file's `#aws-composition` and `#aws-parts/<name>` imports are in a function's bundle
 * (package.json "imports"): `"parts"`, the AWS composition root and the real parts, for the
 * function of a route whose access needs parts; `"composition"`, the composition root and the
 * parts' stand-ins, for the function of a route without (the OpenAPI route, which imports every
 * route file for its definition); `"none"`, stand-ins for both (functions that serve no route, such
 * as `$default`). Stand-ins load no SDK client and fail if used (functions/http/aws-stand-ins.ts).
 */
export type AwsImports = "none" | "composition" | "parts";

/**
 * The conditions of esbuild that make {@link AwsImports}: `sluice-lambda` resolves
 * `#aws-composition` to the composition root, `sluice-aws-parts` `#aws-parts/<name>` to the real
 * part. `module` is esbuild's default, which naming any condition drops: it takes the SDK's ES
 * modules over its CommonJS.
 */
export const esbuildConditions = (aws: AwsImports): string[] => [
  ...(aws === "none" ? [] : ["sluice-lambda"]),
  ...(aws === "parts" ? ["sluice-aws-parts"] : []),
  "module",
];

/**
 * What every Sluice function's bundle is built with, in esbuild's own terms: the construct hands
 * these to `NodejsFunction` (which runs esbuild), and the bench and the bundling test build with
 * them directly. The AWS SDK is bundled, at the versions of package-lock.json, not taken from the
 * runtime (whose version changes under the function); each function's entry names the parts of
 * the AWS composition it uses, so its bundle carries those SDK clients only (docs/aws.md "Cold
 * starts").
 */
export const SLUICE_ESBUILD_OPTIONS = {
  platform: "node",
  format: "esm",
  target: "node22",
  mainFields: ["module", "main"],
  banner: { js: ESM_REQUIRE_BANNER },
  minify: true,
  sourcemap: true,
  // Stack traces need the mappings, not the sources; this keeps the zip small.
  sourcesContent: false,
  // The SDK clients' default credential chain, replaced by its first link, the environment, where
  // Lambda puts the role's credentials: the other links were 130 KB parsed at every cold start
  // (functions/adapters/aws/lambda-credentials.ts, docs/aws.md "Cold starts").
  alias: {
    "@aws-sdk/credential-provider-node": join(PROJECT_ROOT, "functions/adapters/aws/lambda-credentials.ts"),
    // The SDK's event stream support, which no Sluice function uses, replaced by a module that
    // refuses it: the SDK loads it with `import()`, and esbuild wraps every module that reaches in
    // a lazy initializer (150-odd of @smithy/core's in a plain route) and keeps whole barrels
    // (functions/adapters/aws/no-event-streams.ts).
    "@smithy/core/event-streams": join(PROJECT_ROOT, "functions/adapters/aws/no-event-streams.ts"),
  },
  // Evaluated first in every bundle: it maps stack traces to the TypeScript when a stack is
  // formatted, in place of `--enable-source-maps` (functions/adapters/aws/lambda-stack-traces.ts).
  inject: [join(PROJECT_ROOT, "functions/adapters/aws/lambda-stack-traces.ts")],
} as const;

/**
 * `NODE_OPTIONS` of every Sluice function: none. `--enable-source-maps` parsed each bundle's source
 * map at every cold start, whether or not anything threw; the bundles map their stack traces
 * themselves, lazily ({@link SLUICE_ESBUILD_OPTIONS}'s `inject`). The cold-start bench runs the
 * bundles with these options, so that it measures what the functions run.
 */
export const SLUICE_NODE_OPTIONS: readonly string[] = [];

/** The architecture of every Sluice function (and of the source functions the API creates). */
export const SLUICE_ARCHITECTURE = Architecture.ARM_64;

export interface SluiceFunctionProps {
  /**
   * Entry module, relative to the repository root (e.g. `functions/http/get-me.ts`). Its `handler`
   * export is the Lambda handler.
   */
  readonly entry: string;
  /**
   * The execution role, shared with functions granted exactly the same (the API's routes of one
   * access, decision 523); it must write to {@link logGroup}. @default - its own
   */
  readonly role?: Role;
  /** @default - the entry path */
  readonly description?: string;
  /**
   * A fixed name, for a function others must name before CloudFormation made it (where referring to
   * it would be a cycle: the paused-run dispatcher). @default - one CloudFormation generates
   */
  readonly functionName?: string;
  /** Extra environment variables; `NODE_OPTIONS` is set when {@link SLUICE_NODE_OPTIONS} has any. @default - none */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * What the route file's `#aws-composition` and `#aws-parts/<name>` imports are in the bundle: the
   * real ones or stand-ins ({@link AwsImports}). @default "none"
   */
  readonly awsImports?: AwsImports;
  /** @default 512 */
  readonly memorySize?: number;
  /** @default Duration.seconds(10) */
  readonly timeout?: Duration;
  /** How long the function's log group keeps events. @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /**
   * A log group shared with other functions (the API routes'), instead of one of its own; its
   * streams are named after each function (`YYYY/MM/DD/<function name>[<version>]<instance>`).
   * `logRetention` is then the shared group's. @default - a log group of its own
   */
  readonly logGroup?: LogGroup;
  /**
   * Packages left out of the bundle and copied, as installed in `node_modules`, into the function's
   * `node_modules` instead: for packages that cannot be bundled (`esbuild-wasm` loads its `.wasm`
   * file from its own folder). They must be platform independent. @default - none
   */
  readonly copyNodeModules?: readonly string[];
  /**
   * Packages copied the same way for what the function uses at run time other than by importing
   * them (the shipped npm packages it bundles components with, the npm CLI it runs; see
   * {@link withDependencies}). Unlike `copyNodeModules`, they stay in the function's own bundle
   * wherever its code imports them. @default - none
   */
  readonly runtimeNodeModules?: readonly string[];
  /**
   * Folders of the repository copied into the bundle under the same name, for data files the
   * function reads at run time (`registry/` for compute routes). @default - none
   */
  readonly copyFolders?: readonly string[];
  /**
   * Folders from anywhere on the deploying machine (absolute `from`) copied into the bundle as
   * `to` (the operator's registry directory, staged by `stageRegistryDir`). @default - none
   */
  readonly copyTrees?: readonly BundledTree[];
}

/** A folder copied into a function's bundle: `from` (absolute) becomes `<bundle>/<to>`. */
export interface BundledTree {
  readonly from: string;
  readonly to: string;
}

/**
 * A Node.js Lambda function bundled the way every Sluice function is ({@link SLUICE_ESBUILD_OPTIONS}):
 * ESM for Node 22 on arm64, minified with source maps, the AWS SDK v3 bundled, and its own log group.
 */
export class SluiceFunction extends Construct {
  readonly lambdaFunction: NodejsFunction;
  /** Its log group: its own, or the one it shares ({@link SluiceFunctionProps.logGroup}). */
  readonly logGroup: LogGroup;
  /** Its execution role: writes to {@link logGroup}, and holds what its users grant it, nothing else. */
  readonly role: Role;
  /** The entry module, relative to the repository root. */
  readonly entry: string;
  /** The folders copied into the bundle beside the code (`copyFolders`, then `copyTrees`). */
  readonly bundledTrees: readonly BundledTree[];
  /** What it was made with: another function made from them gets the same bundle (the bundling test). */
  readonly props: SluiceFunctionProps;
  /** Imports left out of the bundle (`copyNodeModules`); everything else, the AWS SDK included, is bundled. */
  readonly external: readonly string[];
  /** What its route file's AWS imports are in its bundle ({@link SluiceFunctionProps.awsImports}). */
  readonly awsImports: AwsImports;

  constructor(scope: Construct, id: string, props: SluiceFunctionProps) {
    super(scope, id);
    this.entry = props.entry;
    this.bundledTrees = [
      ...(props.copyFolders ?? []).map((folder) => ({ from: join(PROJECT_ROOT, folder), to: folder })),
      ...(props.copyTrees ?? []),
    ];
    this.props = props;
    this.external = [...(props.copyNodeModules ?? [])];
    this.awsImports = props.awsImports ?? "none";
    const copied = [...(props.copyNodeModules ?? []), ...(props.runtimeNodeModules ?? [])];
    for (const name of copied) {
      // An error annotation fails `cdk synth` and `cdk deploy` with this message, before anything
      // is deployed that could not run.
      if (!existsSync(join(PROJECT_ROOT, "node_modules", name, "package.json"))) {
        Annotations.of(this).addError(
          `${props.entry} needs ${name} in its bundle, but it is not installed: npm install ${name}`,
        );
      }
    }

    // An explicit log group instead of the deprecated `logRetention`, which adds a custom-resource
    // Lambda to the stack. Logs are not data worth a retained orphan: they leave with the stack.
    this.logGroup =
      props.logGroup ??
      new LogGroup(this, "Logs", {
        retention: props.logRetention ?? RetentionDays.ONE_MONTH,
        removalPolicy: RemovalPolicy.DESTROY,
      });

    // Its own role rather than the one NodejsFunction makes, which carries the managed policy
    // AWSLambdaBasicExecutionRole: log groups created and written anywhere (`logs:*` on `*`).
    this.role =
      props.role ??
      new Role(this, "Role", {
        assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
        description: `Sluice ${props.entry}: its log group, and what the stack grants it`,
      });
    this.logGroup.grantWrite(this.role);

    this.lambdaFunction = new NodejsFunction(this, "Function", {
      role: this.role,
      entry: join(PROJECT_ROOT, props.entry),
      handler: "handler",
      description: props.description ?? props.entry,
      ...(props.functionName === undefined ? {} : { functionName: props.functionName }),
      // Node 22 on Lambda, Node 20 locally: the code is written to run on both (DESIGN.md, 9).
      runtime: Runtime.NODEJS_22_X,
      architecture: SLUICE_ARCHITECTURE,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(10),
      logGroup: this.logGroup,
      environment: {
        ...props.environment,
        ...(SLUICE_NODE_OPTIONS.length > 0 ? { NODE_OPTIONS: SLUICE_NODE_OPTIONS.join(" ") } : {}),
      },
      // Pinned so a synth from another working directory finds the same lockfile and tsconfig.
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
      bundling: {
        // Local esbuild only: there is no Docker engine to fall back to.
        forceDockerBundling: false,
        format: OutputFormat.ESM,
        target: SLUICE_ESBUILD_OPTIONS.target,
        mainFields: [...SLUICE_ESBUILD_OPTIONS.mainFields],
        banner: SLUICE_ESBUILD_OPTIONS.banner.js,
        minify: SLUICE_ESBUILD_OPTIONS.minify,
        sourceMap: SLUICE_ESBUILD_OPTIONS.sourcemap,
        sourcesContent: SLUICE_ESBUILD_OPTIONS.sourcesContent,
        inject: [...SLUICE_ESBUILD_OPTIONS.inject],
        // `--alias:<package>=<path>` for each alias (NodejsFunction has no alias option).
        esbuildArgs: {
          "--alias": Object.entries(SLUICE_ESBUILD_OPTIONS.alias).map(([from, to]) => `${from}=${to}`),
          "--conditions": esbuildConditions(this.awsImports).join(","),
        },
        // Given, so CDK's default (`@aws-sdk/*`, left to the runtime) does not apply: the SDK is bundled.
        externalModules: [...this.external],
        ...(copied.length || this.bundledTrees.length ? { commandHooks: copyHooks(copied, this.bundledTrees) } : {}),
      },
    });
  }
}

/**
 * The packages `names` need at run time, as installed under `nodeModules`: the names themselves
 * and every dependency Node would resolve from that top-level folder (dependencies npm nested
 * inside a package's own `node_modules` travel with it). For `copyNodeModules`.
 */
export function withDependencies(
  names: readonly string[],
  nodeModules: string = join(PROJECT_ROOT, "node_modules"),
): string[] {
  const visited = new Set<string>();
  const visit = (packageDir: string | undefined) => {
    if (packageDir === undefined || visited.has(packageDir)) return;
    visited.add(packageDir);
    const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as Record<string, unknown>;
    const needs = ["dependencies", "optionalDependencies", "peerDependencies"].flatMap((field) =>
      Object.keys((manifest[field] as Record<string, string> | undefined) ?? {}),
    );
    for (const name of needs) visit(resolvePackage(name, packageDir, nodeModules));
  };
  for (const name of names) visit(resolvePackage(name, nodeModules, nodeModules));
  return [...visited]
    .map((dir) => relative(nodeModules, dir))
    .filter((path) => !path.split(sep).includes("node_modules"))
    .sort();
}

/** Where Node finds package `name` from `fromDir`: the `node_modules` of it and its parents, up to `root`. */
function resolvePackage(name: string, fromDir: string, root: string): string | undefined {
  for (let dir = fromDir; dir !== root && dir.startsWith(root); dir = dirname(dir)) {
    const nested = join(dir, "node_modules", name);
    if (existsSync(join(nested, "package.json"))) return nested;
  }
  const top = join(root, name);
  return existsSync(join(top, "package.json")) ? top : undefined;
}

/**
 * Copies installed packages and folders into the bundle. Missing packages were reported at
 * construction; they are skipped here.
 */
function copyHooks(packages: readonly string[], trees: readonly BundledTree[]) {
  return {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling(inputDir: string, outputDir: string): string[] {
      const modules = packages
        .filter((name) => existsSync(join(inputDir, "node_modules", name, "package.json")))
        .flatMap((name) => {
          const to = join(outputDir, "node_modules", name);
          return [`mkdir -p "${join(to, "..")}"`, `cp -R "${join(inputDir, "node_modules", name)}/." "${to}"`];
        });
      const data = trees.flatMap((tree) => {
        const to = join(outputDir, tree.to);
        return [`mkdir -p "${to}"`, `cp -R "${tree.from}/." "${to}"`];
      });
      return [...modules, ...data];
    },
  };
}
