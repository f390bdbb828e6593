import { Duration, Fn } from "aws-cdk-lib";
import { type HttpApi, HttpMethod, HttpRoute, HttpRouteKey } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import {
  type CfnFunction,
  type FunctionUrl,
  FunctionUrlAuthType,
  InvokeMode,
  type Function as LambdaFunction,
} from "aws-cdk-lib/aws-lambda";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { AWS_COMPUTE_ENV, STREAM_END_MARGIN_DEFAULT_MS, STREAM_POLL_DEFAULT_MS } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { MAX_STREAMS_DEFAULT } from "../stack-settings.ts";
import { SluiceFunction } from "./sluice-function.ts";
import { grantTableAccess } from "./table-access.ts";

/** Where the HTTP API's `GET /sources/{id}/sse` points clients (the spec's stream address, no `/v1`). */
export const SSE_ROUTE_PATH = "/sources/{id}/sse";
/** A workflow's stream of `$.send.sse` events, redirected the same way (docs/design/workflows.md 1.1). */
export const WORKFLOW_SSE_ROUTE_PATH = "/workflows/{workflow_id}/sse";

export interface EventStreamingProps {
  /** The API that gets `GET /sources/{id}/sse` (a redirect to the stream function's URL). */
  readonly httpApi: HttpApi;
  /** The resources table: read by the stream, written by the purger. */
  readonly resourcesTable: ITableV2;
  /** How often a stream reads the store for new events. @default Duration.millis(500) */
  readonly pollInterval?: Duration;
  /**
   * How long before the stream function's 15 minutes a response ends, so that its client resumes
   * rather than being cut off. @default Duration.seconds(5)
   */
  readonly endMargin?: Duration;
  /**
   * At most this many streams at once (reserved concurrency of the stream function): each open
   * stream holds one concurrent execution for up to 15 minutes, and without a cap streams could
   * take the whole account's concurrency from every other function. `"unreserved"`: no
   * reservation, for an account whose concurrency quota leaves none to reserve (Lambda keeps 100
   * unreserved). @default MAX_STREAMS_DEFAULT (50)
   */
  readonly maxStreams?: number | "unreserved";
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
}

/**
 * The read side of events that a REST function cannot serve (see docs/aws.md, "Event history,
 * deletion and the live stream on AWS"):
 *
 * - the **stream function** (`functions/internal/source-stream-function.ts`) behind a function URL with
 *   response streaming (`RESPONSE_STREAM`); its auth type is `NONE` because the function checks the
 *   Bearer key itself, as every route does; 15 minutes, Lambda's limit, after which clients resume
 *   with `Last-Event-ID`;
 * - `GET /sources/{id}/sse` and `GET /workflows/{workflow_id}/sse` on the HTTP API (which cannot
 *   stream), a `307` to that URL;
 * - the **event purger** (`functions/internal/event-purger.ts`), invoked asynchronously after a
 *   deletion to remove the hidden events; {@link attachPurgeStarter} lets a function start it.
 */
export class EventStreaming extends Construct {
  readonly streamFunction: SluiceFunction;
  readonly streamFunctionUrl: FunctionUrl;
  /** `https://<id>.lambda-url.<region>.on.aws`, without a trailing slash; streams are `<it>/sources/{id}/sse`. */
  readonly streamUrl: string;
  readonly sseRedirect: SluiceFunction;
  readonly eventPurger: SluiceFunction;

  constructor(scope: Construct, id: string, props: EventStreamingProps) {
    super(scope, id);
    const { resourcesTable } = props;

    this.streamFunction = new SluiceFunction(this, "SourceStream", {
      entry: "functions/internal/source-stream-function.ts",
      description:
        "GET <StreamUrl>/sources/{id}/sse and /workflows/{id}/sse: live streams (functions/internal/source-stream-function.ts)",
      // Lambda's limit. The response ends a few seconds before it and the client resumes.
      timeout: Duration.minutes(15),
      // It mostly waits between reads of the store; billed by the millisecond of wall time.
      memorySize: 256,
      environment: {
        [ENV.resourcesTable]: resourcesTable.tableName,
        [AWS_COMPUTE_ENV.streamPollMs]: String(
          (props.pollInterval ?? Duration.millis(STREAM_POLL_DEFAULT_MS)).toMilliseconds(),
        ),
        [AWS_COMPUTE_ENV.streamEndMarginMs]: String(
          (props.endMargin ?? Duration.millis(STREAM_END_MARGIN_DEFAULT_MS)).toMilliseconds(),
        ),
      },
      logRetention: props.logRetention,
    });
    const streamFn = this.streamFunction.lambdaFunction;
    const maxStreams = props.maxStreams ?? MAX_STREAMS_DEFAULT;
    if (maxStreams !== "unreserved") {
      if (!Number.isInteger(maxStreams) || maxStreams < 1) {
        throw new Error(`Invalid maxStreams ${maxStreams}: use a whole number of at least 1, or "unreserved".`);
      }
      (streamFn.node.defaultChild as CfnFunction).reservedConcurrentExecutions = maxStreams;
    }
    grantTableAccess(resourcesTable, streamFn, "read");
    this.streamFunctionUrl = streamFn.addFunctionUrl({
      // Public like the HTTP API: the function refuses requests without a valid key (401).
      authType: FunctionUrlAuthType.NONE,
      invokeMode: InvokeMode.RESPONSE_STREAM,
    });
    // The URL attribute ends in `/`; `https:`, ``, `<host>`, `` once split on it.
    this.streamUrl = Fn.join("", ["https://", Fn.select(2, Fn.split("/", this.streamFunctionUrl.url))]);

    this.sseRedirect = new SluiceFunction(this, "SseRedirect", {
      entry: "functions/internal/sse-redirect.ts",
      description: `GET ${SSE_ROUTE_PATH}: 307 to the stream function's URL (functions/internal/sse-redirect.ts)`,
      environment: { [AWS_COMPUTE_ENV.streamUrl]: this.streamUrl },
      logRetention: props.logRetention,
    });
    // One integration for both routes: one redirect function, a permission per route.
    const redirect = new HttpLambdaIntegration("SseRedirectIntegration", this.sseRedirect.lambdaFunction);
    new HttpRoute(this, "SseRoute", {
      httpApi: props.httpApi,
      routeKey: HttpRouteKey.with(SSE_ROUTE_PATH, HttpMethod.GET),
      integration: redirect,
    });
    new HttpRoute(this, "WorkflowSseRoute", {
      httpApi: props.httpApi,
      routeKey: HttpRouteKey.with(WORKFLOW_SSE_ROUTE_PATH, HttpMethod.GET),
      integration: redirect,
    });

    this.eventPurger = new SluiceFunction(this, "EventPurger", {
      entry: "functions/internal/event-purger.ts",
      description: "Removes deleted events in the background (functions/internal/event-purger.ts)",
      // A large range is deleted 25 items per request; a purge cut short is finished by its retry.
      timeout: Duration.minutes(15),
      memorySize: 256,
      environment: { [ENV.resourcesTable]: resourcesTable.tableName },
      logRetention: props.logRetention,
    });
    grantTableAccess(resourcesTable, this.eventPurger.lambdaFunction, "write");
    // The purge is idempotent: a failed one (throttling, a timeout) is retried; events stay hidden meanwhile.
    this.eventPurger.lambdaFunction.configureAsyncInvoke({ retryAttempts: 2 });
  }

  /** A function that starts purges (`access.eventPurges`): may invoke the purger, and learns its name. */
  attachPurgeStarter(fn: LambdaFunction): void {
    this.eventPurger.lambdaFunction.grantInvoke(fn);
    fn.addEnvironment(AWS_COMPUTE_ENV.eventPurgerFunction, this.eventPurger.lambdaFunction.functionName);
  }
}
