import { Duration } from "aws-cdk-lib";
import { type HttpApi, HttpMethod, HttpRoute, HttpRouteKey } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { ENV } from "#config/env";
import { NPM_CLI_PACKAGE, SHIPPED_NPM_PACKAGES } from "#config/shared-names";
import { awsPartsFor } from "#http/lambda";
import type { AnyRoute } from "#http/route";
import type { EventFanout } from "./event-fanout.ts";
import type { EventStreaming } from "./event-streaming.ts";
import { lambdaEsbuildTree } from "./lambda-esbuild.ts";
import { type BundledTree, SluiceFunction, type SluiceFunctionProps, withDependencies } from "./sluice-function.ts";
import type { SourceCompute } from "./source-compute.ts";
import { grantTableAccess } from "./table-access.ts";

/**
 * What a function that bundles components carries (the deploying routes, the deploy finisher):
 * esbuild with its native binary for Lambda's architecture (lambda-esbuild.ts), esbuild-wasm for
 * when that is missing, the npm packages served without an install and the npm CLI that installs
 * the others (the Lambda runtime has none), the shipped registry and, with `-c registryDir`, the
 * operator's. 1024 MB: bundling is CPU-bound, and Lambda's CPU follows memory.
 */
export function componentBundlingProps(
  scope: Construct,
  registryDir: BundledTree | undefined,
  lambdaPackagesDir?: string,
): Pick<SluiceFunctionProps, "memorySize" | "copyNodeModules" | "runtimeNodeModules" | "copyFolders" | "copyTrees"> {
  const esbuildBinary = lambdaEsbuildTree(scope, lambdaPackagesDir);
  return {
    memorySize: 1024,
    copyNodeModules: ["esbuild", "esbuild-wasm"],
    runtimeNodeModules: withDependencies([...SHIPPED_NPM_PACKAGES, NPM_CLI_PACKAGE]),
    copyFolders: ["registry"],
    copyTrees: [...(registryDir ? [registryDir] : []), ...(esbuildBinary ? [esbuildBinary] : [])],
  };
}

/** What the stack needs to know of a manifest route. */
export type RouteSpec = Pick<AnyRoute, "name" | "method" | "path" | "access">;

export interface ApiRouteFunctionProps {
  /** The API that gets the route keys. */
  readonly httpApi: HttpApi;
  /** The manifest entry; its `name` is the file under `functions/http/` whose `handler` runs. */
  readonly route: RouteSpec;
  /** The resources table, granted as `route.access.resources` says. */
  readonly resourcesTable: ITableV2;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /** The log group the API's route functions share (see `SluiceFunctionProps.logGroup`). @default - its own */
  readonly logGroup?: LogGroup;
  /** What sources run on: needed by routes with `access.compute` or `access.secrets`. */
  readonly sources?: SourceCompute;
  /** The event purger: needed by routes with `access.eventPurges`. */
  readonly eventStreaming?: EventStreaming;
  /**
   * The event bus and the delivery queue: needed by routes with `access.deliveries`, and by routes
   * that run sources' hooks (`access.compute` with `access.secrets`), which store what they emit.
   */
  readonly eventFanout?: EventFanout;
  /**
   * The app catalog's folder (`stageAppsAsset`), carried by routes with table access (those that
   * may read accounts and apps). @default - none: such a route fails when it reads an app
   */
  readonly apps?: BundledTree;
  /** The execution role of the routes of this route's access (decision 523). @default - its own */
  readonly role?: Role;
  /**
   * Where esbuild's native binary for Lambda was fetched (`scripts/fetch-lambda-esbuild.mjs`), for
   * routes with `access.compute`. @default LAMBDA_PACKAGES_DIR (`.lambda-packages/`)
   */
  readonly lambdaPackagesDir?: string;
}

/**
 * The API path of a route, without a trailing slash. The spec writes some paths with one
 * (`POST /sources/`), but an HTTP API route key cannot end in `/` (CDK refuses it at synth and
 * API Gateway at deploy), so the route is declared on the bare path. Requests that do carry the
 * slash and are not matched to it by API Gateway reach the `$default` route.
 */
export function apiPathOf(route: Pick<RouteSpec, "path">): string {
  return route.path.length > 1 ? route.path.replace(/\/+$/, "") : route.path;
}

/** The `METHOD /path` key API Gateway routes a request by. */
export function routeKeyOf(route: Pick<RouteSpec, "method" | "path">): string {
  return `${route.method} ${apiPathOf(route)}`;
}

/** `get-me` → `GetMe`: construct ids follow route names, so logical ids stay stable. */
export function pascalCase(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join("");
}

/**
 * One REST endpoint on AWS: its own Lambda function (least privilege: only the table access the
 * route declares), its Lambda integration and the API route that reaches it.
 */
export class ApiRouteFunction extends Construct {
  readonly function: SluiceFunction;
  /** `METHOD /path`, as in the template's `AWS::ApiGatewayV2::Route`. */
  readonly routeKey: string;

  constructor(scope: Construct, id: string, props: ApiRouteFunctionProps) {
    super(scope, id);
    const { route, resourcesTable } = props;
    const access = route.access.resources;
    // compute: deploys, runs and removes sources and their timers; secrets: seals and opens secret props;
    // eventPurges: starts the background removal of deleted events; deliveries: queues webhook deliveries.
    // pausedRuns: forgets a deleted workflow's paused runs and their schedules (see below).
    const { compute, secrets, eventPurges, deliveries, pausedRuns, files } = route.access;
    // Running a hook needs the source's secret props opened: the routes that deploy or remove
    // sources run hooks, and store and publish the events those emit (the others only bundle,
    // describe and probe, and store nothing a probe emits).
    const appendsEvents = (compute === "deploy" || compute === "remove") && Boolean(secrets);
    if ((compute || secrets) && !props.sources) {
      throw new Error(`Route "${route.name}" needs compute or secrets access, but the stack gave it no SourceCompute`);
    }
    // Deploying runs hooks, which store state and events.
    if (compute && access !== "write") {
      throw new Error(`Route "${route.name}" has compute access, which needs access.resources "write"`);
    }
    // Forgetting a workflow's paused runs deletes their schedules: the rights of `compute` "deploy"
    // and "remove" (deleting schedules of the group, and its name) cover it, and no other grants it.
    if (pausedRuns && compute !== "deploy" && compute !== "remove") {
      throw new Error(`Route "${route.name}" forgets paused runs, which needs access.compute "deploy" or "remove"`);
    }
    if (files && !props.sources) {
      throw new Error(`Route "${route.name}" serves File Store calls, but the stack gave it no SourceCompute`);
    }
    if (eventPurges && !props.eventStreaming) {
      throw new Error(`Route "${route.name}" starts event purges, but the stack gave it no EventStreaming`);
    }
    // A purge follows a deletion, which hides the events in the table first.
    if (eventPurges && access !== "write") {
      throw new Error(`Route "${route.name}" starts event purges, which needs access.resources "write"`);
    }
    if ((deliveries || appendsEvents) && !props.eventFanout) {
      throw new Error(
        `Route "${route.name}" ${deliveries ? "queues webhook deliveries" : "stores events"}, but the stack gave it no EventFanout`,
      );
    }
    // A replay deletes the dead letter it queued again.
    if (deliveries && access !== "write") {
      throw new Error(`Route "${route.name}" queues webhook deliveries, which needs access.resources "write"`);
    }

    // Deploying bundles components: esbuild (native and wasm), the shipped packages, `registry/`
    // and, with `-c registryDir`, the operator's registry directory beside it.
    const bundling = compute
      ? componentBundlingProps(this, props.sources?.bundledRegistryDir, props.lambdaPackagesDir)
      : undefined;
    this.function = new SluiceFunction(this, "Handler", {
      entry: `functions/http/${route.name}.ts`,
      awsImports: awsPartsFor(route.access).length > 0 ? "parts" : "composition",
      description: `${route.method} ${route.path} (functions/http/${route.name}.ts)`,
      // Only functions that may touch the table learn its name; those may show a source, whose
      // HTTP endpoint is `<public URL>/http/<key>`.
      environment: access
        ? { [ENV.resourcesTable]: resourcesTable.tableName, [ENV.publicUrl]: props.httpApi.apiEndpoint }
        : {},
      logRetention: props.logRetention,
      logGroup: props.logGroup,
      role: props.role,
      // Deploying bundles the component, creates its function and may run its hooks: more memory,
      // and the HTTP API's 30 s.
      ...(bundling ? { ...bundling, timeout: Duration.seconds(30) } : {}),
      copyTrees: [...(bundling?.copyTrees ?? []), ...(access && props.apps ? [props.apps] : [])],
    });
    const fn = this.function.lambdaFunction;
    if (compute) props.sources!.attachCompute(fn, compute);
    if (secrets) props.sources!.attachSecrets(fn, { seal: secrets === "seal" });
    if (eventPurges) props.eventStreaming!.attachPurgeStarter(fn);
    // Deleting `$in` events cancels the delayed emits they stand for, schedules included.
    if (eventPurges) props.sources?.attachDelayedEmitCanceller(fn);
    if (appendsEvents) props.eventFanout!.attachPublisher(fn);
    if (deliveries) props.eventFanout!.attachDeliveryQueuer(fn);
    if (files) props.sources!.attachFileStore(fn);

    if (access) grantTableAccess(resourcesTable, fn, access);

    this.routeKey = routeKeyOf(route);
    new HttpRoute(this, "Route", {
      httpApi: props.httpApi,
      routeKey: HttpRouteKey.with(apiPathOf(route), HttpMethod[route.method]),
      // Payload format 2.0 (the default) is what the handlers parse: APIGatewayProxyEventV2.
      integration: new HttpLambdaIntegration("Integration", fn),
    });
  }
}

/**
 * The execution roles of the API's routes: one per distinct `access`, shared by the routes granted
 * exactly the same (decision 523). Each route's function is granted what its access says, on its
 * role; routes of one access would each get the same statements, so one role and one policy serve
 * them all, and no function holds a right another of its access lacks. The stack then holds a role
 * and a policy per kind of route rather than per route (CloudFormation allows 500 resources).
 */
export class RouteRoles extends Construct {
  private readonly roles = new Map<string, Role>();

  /** The role of the routes of `route`'s access, made on first use. */
  of(route: Pick<RouteSpec, "access">): Role {
    const name = accessName(route.access);
    let role = this.roles.get(name);
    if (!role) {
      role = new Role(this, name, {
        assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
        description: `Sluice API routes of access ${name}: the routes' log group, and what their access grants`,
      });
      this.roles.set(name, role);
    }
    return role;
  }
}

/** A route's access as a construct id: `Read`, `WriteDeploySeal`, `WriteDeliveries`, `None`... */
function accessName(access: RouteSpec["access"]): string {
  // `pausedRuns` grants nothing its `compute` level does not: it names no role of its own.
  const { resources, compute, secrets, eventPurges, deliveries, files } = access;
  const parts = [resources, compute, secrets, eventPurges && "purges", deliveries && "deliveries", files && "files"];
  return pascalCase(parts.filter((part): part is string => typeof part === "string").join("-")) || "None";
}
