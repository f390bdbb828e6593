import {
  Aspects,
  CfnOutput,
  CrossStackReferences,
  type Duration,
  ReferenceStrength,
  RemovalPolicy,
  Stack,
  type StackProps,
} from "aws-cdk-lib";
import { HttpApi, HttpRoute, HttpRouteKey } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { IKey } from "aws-cdk-lib/aws-kms";
import { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import type { IBucket } from "aws-cdk-lib/aws-s3";
import type { Construct, IConstruct } from "constructs";
import { ENV } from "#config/env";
import { LOG_LEVELS, type LogLevel } from "#core/ports/logger";
import { routes as manifest } from "#http/routes";
import { AccountRefresher } from "./constructs/account-refresher.ts";
import {
  ApiRouteFunction,
  pascalCase,
  RouteRoles,
  type RouteSpec,
  routeKeyOf,
} from "./constructs/api-route-function.ts";
import { stageAppsAsset } from "./constructs/apps-asset.ts";
import { EventFanout } from "./constructs/event-fanout.ts";
import { EventStreaming, SSE_ROUTE_PATH, WORKFLOW_SSE_ROUTE_PATH } from "./constructs/event-streaming.ts";
import { SluiceFunction } from "./constructs/sluice-function.ts";
import { SourceCompute } from "./constructs/source-compute.ts";
import { LOG_RETENTION_DEFAULT_DAYS } from "./stack-settings.ts";

export interface ServiceStackProps extends StackProps {
  /** The resources table of the stateful stack. */
  readonly resourcesTable: ITableV2;
  /** The REST endpoints to serve. @default - every route of `functions/http/routes.ts` */
  readonly routes?: readonly RouteSpec[];
  /** How long every log group of the stack keeps events (`-c logRetentionDays=`). @default 30 days (LOG_RETENTION_DEFAULT_DAYS) */
  readonly logRetention?: RetentionDays;
  /** Open live streams at most: the stream function's reserved concurrency (`-c maxStreams=`; EventStreaming). @default 50 */
  readonly maxStreams?: number | "unreserved";
  /** Concurrent deliverer invocations per delivery queue (`-c maxDeliveryConcurrency=`; EventFanout). @default 10 */
  readonly maxDeliveryConcurrency?: number;
  /** The key of the stateful stack that seals secret props. */
  readonly secretsKey: IKey;
  /**
   * The stateful stack's bucket of projects' File Stores (`$.files`).
   * @default - none: a run's `$.files` calls fail, saying the stack has no File Store bucket
   */
  readonly fileStoreBucket?: IBucket;
  /** Stage of the deployment (`-c stage=`); names source functions and the schedule group. @default "default" */
  readonly stage?: string;
  /** Time limit of one run or hook of a component. @default Duration.seconds(30) */
  readonly invocationTimeout?: Duration;
  /** The npm registry deploying functions install components' packages from (`-c npmRegistry=`). @default - npm's own */
  readonly npmRegistry?: string;
  /**
   * `SLUICE_LOG_LEVEL` of every function of the stack (`-c logLevel=warn`).
   * @default - unset: the functions log at `info`
   */
  readonly logLevel?: LogLevel;
  /**
   * A components tree in the public registry's layout (`-c registryDir=<path>`), bundled into the
   * deploying routes and served by key before the shipped registry. @default - the shipped registry only
   */
  readonly registryDir?: string;
  /**
   * The operator's apps file (`-c appsFile=<path>`, docs/accounts.md "Apps"), checked at synth and
   * bundled with the shipped apps into the API route functions that read the table.
   * @default - the shipped apps only
   */
  readonly appsFile?: string;
  /** Buckets `$.send.s3` may write to (`-c s3Buckets=a,b`; EventFanout). @default none */
  readonly s3Buckets?: readonly string[];
}

/**
 * The stateless service: the HTTP API and one Lambda function per REST endpoint. It holds no data,
 * so it can be redeployed, or deleted and recreated, without risk to the tables.
 */
export class ServiceStack extends Stack {
  readonly httpApi: HttpApi;
  /** The function of each route, by route name. */
  readonly routeFunctions: ReadonlyMap<string, ApiRouteFunction>;
  /**
   * The one log group of every API route function (and the `$default` one): a group per route
   * would take the stack past CloudFormation's 500 resources (decision 423). Each function's
   * streams carry its name.
   */
  readonly routeLogGroup: LogGroup;
  /** The function behind `$default`, which answers unrouted requests in Sluice's error shape. */
  readonly notFoundFunction: SluiceFunction;
  /** Sources: runtime layer, roles, describer, internal functions, `/http/{key}` routes, schedules. */
  readonly sources: SourceCompute;
  /** Renews OAuth tokens before they expire, every 5 minutes (docs/accounts.md "Refresh"). */
  readonly accountRefresher: AccountRefresher;
  /** The live stream (function URL with response streaming), its `/sources/{id}/sse` redirect, the event purger. */
  readonly eventStreaming: EventStreaming;
  /** Subscriptions and webhook delivery: the bus, its rule, the dispatcher, the delivery queues and the deliverer. */
  readonly eventFanout: EventFanout;

  constructor(scope: Construct, id: string, props: ServiceStackProps) {
    super(scope, id, props);
    // Strong references (Export/ImportValue): CloudFormation refuses to delete the stateful stack,
    // or to drop what it exports, while this stack still uses it. Set explicitly, as CDK asks.
    CrossStackReferences.of(this).consume(ReferenceStrength.STRONG);
    const routes = props.routes ?? manifest;
    const logRetention = props.logRetention ?? (LOG_RETENTION_DEFAULT_DAYS as RetentionDays);
    if (props.logLevel !== undefined) setLogLevel(this, props.logLevel);
    assertDistinctRouteKeys(routes);

    // An HTTP API rather than a REST API: payload format 2.0, lower price and latency. The
    // real-time stream needs response streaming, which it gets from a function URL (EventStreaming).
    this.httpApi = new HttpApi(this, "HttpApi", {
      description: "Sluice REST API",
    });

    // Before the functions that carry it: a bad `-c appsFile` fails the synth first.
    const apps = stageAppsAsset(props.appsFile);
    this.sources = new SourceCompute(this, "Sources", {
      httpApi: this.httpApi,
      resourcesTable: props.resourcesTable,
      secretsKey: props.secretsKey,
      ...(props.fileStoreBucket ? { fileStoreBucket: props.fileStoreBucket } : {}),
      stage: props.stage ?? "default",
      invocationTimeout: props.invocationTimeout,
      logRetention,
      npmRegistry: props.npmRegistry,
      registryDir: props.registryDir,
      apps,
    });

    this.eventStreaming = new EventStreaming(this, "EventStreaming", {
      httpApi: this.httpApi,
      resourcesTable: props.resourcesTable,
      logRetention,
      maxStreams: props.maxStreams,
    });

    this.eventFanout = new EventFanout(this, "EventFanout", {
      resourcesTable: props.resourcesTable,
      sources: this.sources,
      stage: props.stage ?? "default",
      logRetention,
      s3Buckets: props.s3Buckets,
      maxDeliveryConcurrency: props.maxDeliveryConcurrency,
    });

    this.accountRefresher = new AccountRefresher(this, "Accounts", {
      resourcesTable: props.resourcesTable,
      sources: this.sources,
      eventFanout: this.eventFanout,
      apps,
      logRetention,
    });

    this.routeLogGroup = new LogGroup(this, "RouteLogs", {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const routeFunctions = new Map<string, ApiRouteFunction>();
    const roles = new RouteRoles(this, "RouteRoles");
    for (const route of routes) {
      routeFunctions.set(
        route.name,
        new ApiRouteFunction(this, pascalCase(route.name), {
          httpApi: this.httpApi,
          route,
          role: roles.of(route),
          resourcesTable: props.resourcesTable,
          logRetention,
          logGroup: this.routeLogGroup,
          sources: this.sources,
          eventStreaming: this.eventStreaming,
          eventFanout: this.eventFanout,
          apps,
        }),
      );
    }
    this.routeFunctions = routeFunctions;

    // Without a `$default` route, API Gateway answers unknown paths itself with
    // `{"message":"Not Found"}`; this function gives them the `{"error": ...}` shape and a 405 with
    // `Allow` for a known path with another method. It needs no table.
    this.notFoundFunction = new SluiceFunction(this, "RouteNotFound", {
      entry: "functions/http/route-not-found.ts",
      description: "$default: 404/405 for unrouted requests (functions/http/route-not-found.ts)",
      logRetention,
      logGroup: this.routeLogGroup,
    });
    new HttpRoute(this, "DefaultRoute", {
      httpApi: this.httpApi,
      routeKey: HttpRouteKey.DEFAULT,
      integration: new HttpLambdaIntegration("RouteNotFoundIntegration", this.notFoundFunction.lambdaFunction),
    });

    // `url` is only undefined without a default stage, which this API always has.
    const url = this.httpApi.url;
    if (!url) throw new Error("ServiceStack: the HTTP API has no default stage, so it has no URL");
    new CfnOutput(this, "ApiUrl", {
      value: `${url}v1`,
      description: "Base URL of the Sluice REST API (the spec's /v1)",
    });
    new CfnOutput(this, "StreamUrl", {
      value: this.eventStreaming.streamUrl,
      description: `Base URL of live streams: <StreamUrl>${SSE_ROUTE_PATH} (Lambda function URL with response streaming)`,
    });
  }
}

/** Two routes on one `METHOD path` would fail only at deploy time; fail at synth instead. */
function assertDistinctRouteKeys(routes: readonly RouteSpec[]): void {
  // Declared by EventStreaming, outside the manifest.
  const owners = new Map<string, string>([
    [`GET ${SSE_ROUTE_PATH}`, "the live stream's redirect"],
    [`GET ${WORKFLOW_SSE_ROUTE_PATH}`, "the workflow stream's redirect"],
  ]);
  for (const route of routes) {
    const key = routeKeyOf(route);
    const owner = owners.get(key);
    if (owner) {
      throw new Error(
        `Routes "${owner}" and "${route.name}" both claim "${key}" (a trailing slash does not count); change one path in functions/http/.`,
      );
    }
    owners.set(key, route.name);
  }
}

/** Sets `SLUICE_LOG_LEVEL` on every Lambda function under `scope`, those of its constructs included. */
function setLogLevel(scope: IConstruct, level: LogLevel): void {
  if (!LOG_LEVELS.includes(level)) {
    throw new Error(`Invalid logLevel ${JSON.stringify(level)}: use one of ${LOG_LEVELS.join(", ")}.`);
  }
  Aspects.of(scope).add({
    visit(node) {
      if (node instanceof LambdaFunction) node.addEnvironment(ENV.logLevel, level);
    },
  });
}
