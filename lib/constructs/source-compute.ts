import { ArnFormat, Duration, RemovalPolicy, Stack } from "aws-cdk-lib";
import { type HttpApi, HttpMethod, HttpRoute, HttpRouteKey } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import { Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction as LambdaTarget } from "aws-cdk-lib/aws-events-targets";
import { Effect, type IGrantable, PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { IKey } from "aws-cdk-lib/aws-kms";
import { Architecture, Function as LambdaFunction, LayerVersion, Runtime } from "aws-cdk-lib/aws-lambda";
import { SqsDestination } from "aws-cdk-lib/aws-lambda-destinations";
import { LogGroup, RetentionDays } from "aws-cdk-lib/aws-logs";
import { BlockPublicAccess, Bucket, BucketEncryption, type IBucket, ObjectOwnership } from "aws-cdk-lib/aws-s3";
import { CfnScheduleGroup } from "aws-cdk-lib/aws-scheduler";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { NPM_TREES_PREFIX, PROBE_ID_TIME, REGISTRY_DIR_ASSET, SQS_MAX_MESSAGE_BYTES } from "#config/shared-names";
import type { ComputeAccess } from "#http/route";
import { componentBundlingProps } from "./api-route-function.ts";
import { esbuildCode } from "./esbuild-code.ts";
import { stageRegistryDir } from "./registry-dir.ts";
import { type BundledTree, SluiceFunction } from "./sluice-function.ts";
import { grantTableAccess } from "./table-access.ts";

/** The file the source functions' entry imports: `/opt/nodejs/sluice-runtime.mjs` once the layer is unpacked. */
export const RUNTIME_LAYER_FILE = "nodejs/sluice-runtime.mjs";
export const RUNTIME_LAYER_ENTRY = "runtime-layer/lambda-entry.ts";
/** The describer's two files: its handler, and the sandbox child program it forks. */
export const DESCRIBER_FILES = {
  "index.mjs": "functions/internal/describer.ts",
  "sandbox-entry.mjs": "runtime-layer/sandbox-entry.ts",
} as const;

/** How often the deploy sweeper runs; a deploy is taken for interrupted 15 minutes after it began. */
export const DEPLOY_SWEEP_INTERVAL = Duration.minutes(5);

/**
 * How long a deploy finisher's job may wait in Lambda's queue: it must start early enough to end
 * (its timeout, 2 minutes by default) before the sweep may take its source, 15 minutes after the
 * deploy began (#core/sources `DEPLOY_ABANDONED_AFTER_MS`); a job that waited longer is dropped,
 * and the sweep removes the source.
 */
export const DEPLOY_FINISHER_MAX_EVENT_AGE = Duration.minutes(10);

/**
 * A tree is deleted this long after it was stored, used or not (S3 lifecycle rules count from an
 * object's creation, not its last read); the next deploy of its set installs and stores it again.
 */
export const NPM_TREES_EXPIRY = Duration.days(30);

/** The paused-run dispatcher's function name: fixed, so that its ARN is known without referring to it. */
export const pausedRunDispatcherNameFor = (stage: string): string => `sluice-${stage}-paused-run-dispatcher`;

/** The queue of queued runs that failed every try: named after the stage, so operators find it. */
export const failedRunsQueueNameFor = (stage: string): string => `sluice-${stage}-failed-runs`;

export interface SourceComputeProps {
  /** The API that gets the catch-all HTTP interface routes. */
  readonly httpApi: HttpApi;
  /** The resources table of the stateful stack. */
  readonly resourcesTable: ITableV2;
  /** The key that seals secret props. */
  readonly secretsKey: IKey;
  /** The bucket of projects' File Stores (the stateful stack's). @default - none */
  readonly fileStoreBucket?: IBucket;
  /** Stage of the deployment: source functions are `sluice-<stage>-<source id>`. */
  readonly stage: string;
  /** Time limit of one run or hook of a component. @default Duration.seconds(30) */
  readonly invocationTimeout?: Duration;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /**
   * The npm registry that deploying functions install components' packages from (an http or https
   * URL, e.g. a mirror). @default - npm's own default, https://registry.npmjs.org/
   */
  readonly npmRegistry?: string;
  /**
   * A registry directory (`-c registryDir`) the deploying routes carry and serve by key before the
   * shipped `registry/`, as `SLUICE_REGISTRY_DIR` does in local mode; staged and filtered at synth
   * ({@link stageRegistryDir}). @default - the shipped registry only
   */
  readonly registryDir?: string;
  /**
   * The app catalog's folder (`stageAppsAsset`), carried by the functions that run sources and
   * workflows (the endpoint function, the source runner, the timer invoker), where an account's
   * credentials are read for a run. @default - none
   */
  readonly apps?: BundledTree;
}

/**
 * Everything sources run on, on AWS (DESIGN.md decision 4): the runtime layer that source functions
 * are created with at run time (by the API, not by CloudFormation), their logging-only role and
 * shared log group, the describer, the internal functions (HTTP interface, source runner, timer
 * invoker, paused-run dispatcher), the queue of runs that failed every try, the catch-all routes
 * `ANY /http/{key}[/{proxy+}]` and the paused runs' `ANY /flow/{run_id}/{secret}/{action}`, the schedule group and the role EventBridge Scheduler invokes timers
 * with. `attachCompute`, `attachRunner`, `attachRunQueuer` and `attachSecrets` give other functions
 * exactly the permissions and settings they need.
 */
export class SourceCompute extends Construct {
  readonly runtimeLayer: LayerVersion;
  /** Execution role of every source function: it may write to {@link sourceLogGroup}, nothing else. */
  readonly sourceRole: Role;
  readonly sourceLogGroup: LogGroup;
  readonly describer: LambdaFunction;
  readonly httpInterface: SluiceFunction;
  readonly sourceRunner: SluiceFunction;
  /**
   * `sluice-<stage>-failed-runs`: the source runner's on-failure destination. Lambda's record of
   * each queued run that failed its three tries (or waited in Lambda's queue for 6 hours), the job
   * under `requestPayload`; replayed by hand (docs/aws.md, "Queued runs that keep failing").
   */
  readonly failedRunsQueue: Queue;
  readonly timerInvoker: SluiceFunction;
  /**
   * Removes sources whose deploy was interrupted (functions/internal/deploy-sweeper.ts), run by
   * {@link deploySweepRule} every {@link DEPLOY_SWEEP_INTERVAL}.
   */
  readonly deploySweeper: SluiceFunction;
  readonly deploySweepRule: Rule;
  /**
   * Finishes the deploys `POST /v1/sources` hands over when their steps cannot fit in the request's
   * time (functions/internal/deploy-finisher.ts), invoked asynchronously by the deploying routes.
   */
  readonly deployFinisher: SluiceFunction;
  /**
   * Emits a delayed emit when its one-time schedule fires (functions/internal/delayed-emit-deliverer.ts).
   * It runs no component: it reads the row, stores and publishes the event (EventFanout gives it the bus).
   */
  readonly delayedEmitDeliverer: SluiceFunction;
  /**
   * Dispatches a paused workflow run when its one-time schedule fires, and queues its continuation
   * on the source runner (functions/internal/paused-run-dispatcher.ts). Named
   * {@link pausedRunDispatcherNameFor}: the source runner, which it invokes, names it in the
   * schedules it makes, and a reference both ways would be a cycle.
   */
  readonly pausedRunDispatcher: SluiceFunction;
  /**
   * Installed npm trees by resolved dependency set (`npm-trees/<sha256>.zip`): read and written by
   * the functions that install components' packages (the deploying routes, the deploy finisher),
   * so an install happens once per set rather than once per execution environment. A cache: it
   * leaves with the stack (once emptied, docs/aws.md) and its objects expire.
   */
  readonly npmTrees: Bucket;
  readonly scheduleGroup: CfnScheduleGroup;
  /** Assumed by EventBridge Scheduler; may invoke the timer invoker, the delayed emit deliverer and the paused-run dispatcher only. */
  readonly schedulerRole: Role;
  /** `arn:<partition>:lambda:<region>:<account>:function:sluice-<stage>-dc_*` */
  readonly sourceFunctionsArn: string;
  /** `arn:<partition>:lambda:<region>:<account>:function:sluice-<stage>-p_*`: workflows' functions, on the same terms. */
  readonly workflowFunctionsArn: string;
  /**
   * `...:function:sluice-<stage>-p_0000000000*`: the functions of actions run on their own (the
   * Connect run action), whose probe workflow ids have a time part of 0 (`run-action.ts`), which no
   * real workflow's id has.
   */
  readonly probeWorkflowFunctionsArn: string;

  /** The registry directory deploying routes carry (`registryDir`, staged), if any. */
  readonly bundledRegistryDir: BundledTree | undefined;

  readonly #props: SourceComputeProps;
  readonly #invocationTimeout: Duration;

  constructor(scope: Construct, id: string, props: SourceComputeProps) {
    super(scope, id);
    if (props.npmRegistry !== undefined && !isHttpUrl(props.npmRegistry)) {
      throw new Error(`npmRegistry ${JSON.stringify(props.npmRegistry)} is not an http or https URL`);
    }
    this.#props = props;
    this.bundledRegistryDir =
      props.registryDir === undefined
        ? undefined
        : { from: stageRegistryDir(props.registryDir).dir, to: REGISTRY_DIR_ASSET };
    this.#invocationTimeout = props.invocationTimeout ?? Duration.seconds(30);
    const stack = Stack.of(this);
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const functionsArn = (idPrefix: string) =>
      stack.formatArn({
        service: "lambda",
        resource: "function",
        resourceName: `sluice-${props.stage}-${idPrefix}*`,
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      });
    this.sourceFunctionsArn = functionsArn("dc_");
    this.workflowFunctionsArn = functionsArn("p_");
    this.probeWorkflowFunctionsArn = functionsArn(`p_${PROBE_ID_TIME}`);

    // Attached to no function of this stack: the API creates source functions with it and learns
    // its version ARN from SLUICE_RUNTIME_LAYER_ARN. A new version leaves existing functions on the
    // old one (Lambda keeps a copy) until their source is deployed again.
    this.runtimeLayer = new LayerVersion(this, "RuntimeLayer", {
      code: esbuildCode({ [RUNTIME_LAYER_FILE]: RUNTIME_LAYER_ENTRY }),
      compatibleRuntimes: [Runtime.NODEJS_22_X],
      compatibleArchitectures: [Architecture.ARM_64],
      description: "Sluice component runtime (runtime-layer/lambda-entry.ts) for deployed sources",
    });

    // One group for all source functions instead of one per function: it has a retention and
    // leaves with the stack, where Lambda's default groups would be kept forever.
    this.sourceLogGroup = new LogGroup(this, "SourceLogs", {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.sourceRole = new Role(this, "SourceRole", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: "Deployed Sluice sources: write their logs, nothing else",
    });
    this.sourceLogGroup.grantWrite(this.sourceRole);

    const describerLogs = new LogGroup(this, "DescriberLogs", {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const describerRole = new Role(this, "DescriberRole", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: "Sluice describer: evaluates untrusted component code; writes its logs, nothing else",
    });
    describerLogs.grantWrite(describerRole);
    this.describer = new LambdaFunction(this, "Describer", {
      code: esbuildCode(DESCRIBER_FILES),
      handler: "index.handler",
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: 512,
      timeout: Duration.seconds(15),
      role: describerRole,
      logGroup: describerLogs,
      description: "Reads a component's metadata in a sandboxed child process (functions/internal/describer.ts)",
    });

    // Before the functions that apply runs: they schedule delayed emits in this group, with this role.
    this.scheduleGroup = new CfnScheduleGroup(this, "ScheduleGroup", { name: `sluice-${props.stage}` });
    this.schedulerRole = new Role(this, "SchedulerRole", {
      // Only schedules of this account may use the role (confused-deputy protection).
      assumedBy: new ServicePrincipal("scheduler.amazonaws.com", {
        conditions: { StringEquals: { "aws:SourceAccount": stack.account } },
      }),
      description:
        "EventBridge Scheduler: invokes the Sluice timer invoker, delayed emit deliverer and paused-run dispatcher, nothing else",
    });
    this.delayedEmitDeliverer = new SluiceFunction(this, "DelayedEmitDeliverer", {
      entry: "functions/internal/delayed-emit-deliverer.ts",
      description: "Emits delayed emits when their schedule fires (functions/internal/delayed-emit-deliverer.ts)",
      timeout: Duration.seconds(30),
      logRetention: props.logRetention,
    });
    // Lambda's default two retries: a failed delivery is tried again, and emits at least once.
    grantTableAccess(props.resourcesTable, this.delayedEmitDeliverer.lambdaFunction, "write");
    this.delayedEmitDeliverer.lambdaFunction.addEnvironment(ENV.resourcesTable, props.resourcesTable.tableName);

    this.httpInterface = new SluiceFunction(this, "HttpInterface", {
      entry: "functions/internal/endpoint-function.ts",
      description:
        "ANY /http/{key}, /flow/...: sources' HTTP endpoints, paused runs' URLs (functions/internal/endpoint-function.ts)",
      copyTrees: props.apps ? [props.apps] : [],
      // The HTTP API gives up after 30 s whatever the function does.
      timeout: Duration.seconds(30),
      logRetention: props.logRetention,
    });
    this.sourceRunner = new SluiceFunction(this, "SourceRunner", {
      entry: "functions/internal/source-runner.ts",
      description: "Runs queued source runs (functions/internal/source-runner.ts)",
      copyTrees: props.apps ? [props.apps] : [],
      timeout: this.#invocationTimeout.plus(Duration.seconds(30)),
      logRetention: props.logRetention,
    });
    this.failedRunsQueue = new Queue(this, "FailedRuns", {
      queueName: failedRunsQueueNameFor(props.stage),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      // Lambda's record carries the job (up to Lambda's 1 MiB payload limit) under `requestPayload`.
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
    });
    // A failure here is Sluice's (the store), not the component's: retried, at least once delivery;
    // a run that fails every try is kept, not dropped (local mode keeps its job row).
    this.sourceRunner.lambdaFunction.configureAsyncInvoke({
      retryAttempts: 2,
      onFailure: new SqsDestination(this.failedRunsQueue),
    });
    this.timerInvoker = new SluiceFunction(this, "TimerInvoker", {
      entry: "functions/internal/timer-invoker.ts",
      description: "Runs sources' timers for EventBridge Scheduler (functions/internal/timer-invoker.ts)",
      copyTrees: props.apps ? [props.apps] : [],
      // Sub-minute timers run for up to a minute, and the last run then needs its own time.
      timeout: this.#invocationTimeout.plus(Duration.seconds(90)),
      logRetention: props.logRetention,
    });
    // A retried tick would come late and overlap the next one; the next tick comes anyway.
    this.timerInvoker.lambdaFunction.configureAsyncInvoke({ retryAttempts: 0 });
    for (const { lambdaFunction: fn } of [this.httpInterface, this.sourceRunner, this.timerInvoker]) {
      // What a route function gets from its `access.resources: "write"` (ApiRouteFunction).
      grantTableAccess(props.resourcesTable, fn, "write");
      fn.addEnvironment(ENV.resourcesTable, props.resourcesTable.tableName);
      // The API's base URL without a trailing slash: endpoints are `<url>/http/<key>`.
      fn.addEnvironment(ENV.publicUrl, props.httpApi.apiEndpoint);
      this.attachRunner(fn);
      // Open secret props; seal the grant a run with data stores reaches them with (grantDataStores).
      this.attachSecrets(fn, { seal: true });
    }

    const integration = new HttpLambdaIntegration("HttpInterfaceIntegration", this.httpInterface.lambdaFunction);
    for (const [routeId, path] of [
      ["HttpInterfaceRoute", "/http/{key}"],
      ["HttpInterfaceProxyRoute", "/http/{key}/{proxy+}"],
      // A paused run's resume and cancel URLs (#core/workflow-pauses `FLOW_PATH`), answered by the
      // same function: any method, no API key (the secret in the path is the proof).
      ["FlowRoute", "/flow/{run_id}/{secret}/{action}"],
    ] as const) {
      new HttpRoute(this, routeId, {
        httpApi: props.httpApi,
        routeKey: HttpRouteKey.with(path, HttpMethod.ANY),
        integration,
      });
    }

    this.timerInvoker.lambdaFunction.grantInvoke(this.schedulerRole);

    this.deploySweeper = new SluiceFunction(this, "DeploySweeper", {
      entry: "functions/internal/deploy-sweeper.ts",
      description: "Removes sources whose deploy was interrupted (functions/internal/deploy-sweeper.ts)",
      // Each source removed deletes its function, schedule, subscriptions and events.
      timeout: Duration.minutes(5),
      logRetention: props.logRetention,
    });
    {
      const fn = this.deploySweeper.lambdaFunction;
      // Removing a source is what DELETE /v1/sources/{id} does, without its hooks: the table,
      // and deleting the source's function and schedule.
      grantTableAccess(props.resourcesTable, fn, "write");
      fn.addEnvironment(ENV.resourcesTable, props.resourcesTable.tableName);
      fn.addEnvironment(ENV.publicUrl, props.httpApi.apiEndpoint);
      this.attachRemover(fn);
      // A missed run changes nothing the next one does not do.
      fn.configureAsyncInvoke({ retryAttempts: 0 });
    }
    this.deploySweepRule = new Rule(this, "DeploySweep", {
      schedule: Schedule.rate(DEPLOY_SWEEP_INTERVAL),
      description: "Runs the deploy sweeper (docs/aws.md, Interrupted deploys)",
      targets: [new LambdaTarget(this.deploySweeper.lambdaFunction, { retryAttempts: 0 })],
    });
    this.delayedEmitDeliverer.lambdaFunction.grantInvoke(this.schedulerRole);

    this.pausedRunDispatcher = new SluiceFunction(this, "PausedRunDispatcher", {
      entry: "functions/internal/paused-run-dispatcher.ts",
      functionName: pausedRunDispatcherNameFor(props.stage),
      description:
        "Dispatches paused workflow runs when their time comes (functions/internal/paused-run-dispatcher.ts)",
      timeout: Duration.seconds(30),
      logRetention: props.logRetention,
    });
    {
      const fn = this.pausedRunDispatcher.lambdaFunction;
      // It takes the pause and queues its continuation; it runs nothing and makes no schedule.
      // Lambda's default two retries: a dispatch or a queueing that failed is done again.
      grantTableAccess(props.resourcesTable, fn, "write");
      fn.addEnvironment(ENV.resourcesTable, props.resourcesTable.tableName);
      this.attachRunQueuer(fn);
      fn.grantInvoke(this.schedulerRole);
    }
    // Runs workflows, so pauses them (and forgets a pause once its continuation ended).
    this.#attachPauser(this.sourceRunner.lambdaFunction);

    this.npmTrees = new Bucket(this, "NpmTrees", {
      encryption: BucketEncryption.S3_MANAGED,
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      // No autoDeleteObjects: it adds a custom resource whose Lambda function may delete every
      // object; a bucket left with trees in it fails the stack's deletion until emptied (docs/aws.md).
      removalPolicy: RemovalPolicy.DESTROY,
      lifecycleRules: [
        {
          id: "ExpireNpmTrees",
          prefix: NPM_TREES_PREFIX,
          expiration: NPM_TREES_EXPIRY,
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });

    this.deployFinisher = new SluiceFunction(this, "DeployFinisher", {
      entry: "functions/internal/deploy-finisher.ts",
      description: "Finishes deploys that did not fit in their request (functions/internal/deploy-finisher.ts)",
      // Its function (created, then waited for up to 20 s) and two hooks with their whole limits.
      timeout: Duration.seconds(this.#invocationTimeout.toSeconds() * 2 + 60),
      logRetention: props.logRetention,
      ...componentBundlingProps(this, this.bundledRegistryDir),
    });
    {
      const fn = this.deployFinisher.lambdaFunction;
      grantTableAccess(props.resourcesTable, fn, "write");
      fn.addEnvironment(ENV.resourcesTable, props.resourcesTable.tableName);
      fn.addEnvironment(ENV.publicUrl, props.httpApi.apiEndpoint);
      // What a deploying route does after its source is saved, without reading metadata (no describer).
      const functions = [this.sourceFunctionsArn];
      this.#attachInvoker(fn, functions);
      this.#attachFunctionCreator(fn, functions);
      // A failed deploy removes the function it made.
      fn.addToRolePolicy(new PolicyStatement({ actions: ["lambda:DeleteFunction"], resources: functions }));
      this.#attachSchedules(fn, "manage");
      this.#nameDelayedEmitDeliverer(fn);
      if (props.npmRegistry !== undefined) fn.addEnvironment(ENV.npmRegistry, props.npmRegistry);
      this.#attachNpmTrees(fn);
      this.attachSecrets(fn, { seal: true });
      // A retry could run a hook twice; a job not started within the sweep's bound is left to the sweep.
      fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: DEPLOY_FINISHER_MAX_EVENT_AGE });
    }
  }

  /**
   * A function that runs sources and workflows: invoke their functions (and wait for them to become
   * active), queue runs on the source runner (all but the runner itself), and the stage and time
   * limit. It also needs read and write access to the resources table and the public URL, which its
   * caller gives.
   */
  attachRunner(fn: LambdaFunction): void {
    this.#attachInvoker(fn, [this.sourceFunctionsArn, this.workflowFunctionsArn]);
    // The runner itself queues nothing (and naming itself would be a reference cycle).
    if (fn !== this.sourceRunner.lambdaFunction) this.attachRunQueuer(fn);
    this.attachDelayedEmitScheduler(fn);
  }

  /**
   * A function that applies runs, and so schedules their delayed emits (`SchedulerDelayedEmits`):
   * may create one-time schedules in the group that invoke the deliverer with the scheduler role,
   * and delete them (a source deleted by a deploying route cancels its pending ones).
   */
  attachDelayedEmitScheduler(fn: LambdaFunction): void {
    this.attachDelayedEmitCanceller(fn);
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["scheduler:CreateSchedule"], resources: [this.#schedulesArn()] }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["iam:PassRole"],
        resources: [this.schedulerRole.roleArn],
        conditions: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } },
      }),
    );
    fn.addEnvironment(AWS_COMPUTE_ENV.schedulerRoleArn, this.schedulerRole.roleArn);
    this.#nameDelayedEmitDeliverer(fn);
  }

  /** The function delayed emits' schedules invoke (a function that schedules them names it). */
  #nameDelayedEmitDeliverer(fn: LambdaFunction): void {
    fn.addEnvironment(AWS_COMPUTE_ENV.delayedEmitDelivererArn, this.delayedEmitDeliverer.lambdaFunction.functionArn);
  }

  /**
   * A function that cancels delayed emits (deletes `$in` events or sources): may delete schedules
   * of the group, and learns its name. The rows are what decide; deleting the schedule keeps the
   * account's schedule count down.
   */
  attachDelayedEmitCanceller(fn: LambdaFunction): void {
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["scheduler:DeleteSchedule"], resources: [this.#schedulesArn()] }),
    );
    fn.addEnvironment(AWS_COMPUTE_ENV.scheduleGroup, this.scheduleGroup.ref);
  }

  /**
   * The function that runs queued workflow runs, and so pauses them (`SchedulerPausedRuns`). What
   * {@link attachRunner} gave it for delayed emits covers most of that: creating and deleting
   * one-time schedules in the group, passing the scheduler role, the group's and the role's names.
   * A pause's schedule may also be updated (a run done again pauses again, later), and invokes the
   * dispatcher, whose ARN is made from its fixed name, not referred to (see {@link pausedRunDispatcher}).
   */
  #attachPauser(fn: LambdaFunction): void {
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["scheduler:UpdateSchedule"], resources: [this.#schedulesArn()] }),
    );
    fn.addEnvironment(
      AWS_COMPUTE_ENV.pausedRunDispatcherArn,
      Stack.of(this).formatArn({
        service: "lambda",
        resource: "function",
        resourceName: pausedRunDispatcherNameFor(this.#props.stage),
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      }),
    );
  }

  /** A function that queues runs (`LambdaRunQueue`): may invoke the source runner, and learns its name. */
  attachRunQueuer(fn: LambdaFunction): void {
    this.sourceRunner.lambdaFunction.grantInvoke(fn);
    fn.addEnvironment(AWS_COMPUTE_ENV.sourceRunnerFunction, this.sourceRunner.lambdaFunction.functionName);
  }

  /**
   * A route function with `access.compute` at `level` (functions/http/route.ts) gets exactly what
   * that level does on AWS, and nothing of the levels above it:
   *
   * - `describe`: invoke the describer (after bundling, with the npm registry to install from);
   * - `probe`: also create and update source functions (`dc_` only: a probe is a source), with the
   *   runtime layer and the source role, and invoke them;
   * - `run`: the same on source functions and the probe workflows' (`sluice-<stage>-p_0000000000*`
   *   only: an action run on its own is a one-step workflow of a time-0 id, its `additionalProps`
   *   asked on a probe source);
   * - `remove`: invoke source and workflow functions (their `deactivate` hooks) and the deploy
   *   finisher (a `deactivate` the request has no time for), delete them and their timers' schedules;
   * - `deploy`: all of the above on source and workflow functions, and create and update schedules
   *   with the scheduler role.
   *
   * None of them queues runs: hooks run in the request, and what they emit is published.
   */
  attachCompute(fn: LambdaFunction, level: ComputeAccess): void {
    if (level !== "remove") this.#attachDescriber(fn);
    if (level === "describe") return;
    const functions =
      level === "probe"
        ? [this.sourceFunctionsArn]
        : level === "run"
          ? [this.sourceFunctionsArn, this.probeWorkflowFunctionsArn]
          : [this.sourceFunctionsArn, this.workflowFunctionsArn];
    this.#attachInvoker(fn, functions);
    if (level === "probe" || level === "run" || level === "deploy") this.#attachFunctionCreator(fn, functions);
    if (level === "remove" || level === "deploy") {
      fn.addToRolePolicy(new PolicyStatement({ actions: ["lambda:DeleteFunction"], resources: functions }));
      this.#attachSchedules(fn, level === "deploy" ? "manage" : "delete");
    }
    // Deploying runs hooks, whose delayed emits are scheduled: the schedules' rights above cover
    // them (removing a source cancels its own with the delete right), the deliverer is named here.
    // What does not fit in the request goes to the finisher: a deploy's steps, a deletion's deactivate().
    if (level === "remove" || level === "deploy") {
      this.deployFinisher.lambdaFunction.grantInvoke(fn);
      fn.addEnvironment(AWS_COMPUTE_ENV.deployFinisherFunction, this.deployFinisher.lambdaFunction.functionName);
    }
    if (level === "deploy") {
      this.#nameDelayedEmitDeliverer(fn);
      this.#attachNpmTrees(fn);
    }
  }

  /**
   * A function that installs components' packages for deploys: read and store installed trees,
   * `npm-trees/*` of {@link npmTrees} only, and nothing else of it (no list, no delete: a tree
   * never changes, and the lifecycle rule removes it). Without `s3:ListBucket`, S3 answers a tree
   * not there with 403 rather than 404; the store treats any failed read as a miss.
   */
  #attachNpmTrees(fn: LambdaFunction): void {
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:GetObject", "s3:PutObject"],
        resources: [this.npmTrees.arnForObjects(`${NPM_TREES_PREFIX}*`)],
      }),
    );
    fn.addEnvironment(ENV.npmTreesBucket, this.npmTrees.bucketName);
    // The stack's own account must own it (ExpectedBucketOwner): a bucket of that name re-created
    // elsewhere is never read from.
    fn.addEnvironment(ENV.s3ExpectedOwner, Stack.of(this).account);
  }

  /**
   * A function that only removes sources (the deploy sweeper): delete their functions, timers'
   * schedules and delayed emits' schedules, and nothing else: no hook runs, so it invokes nothing.
   * It also needs read and write access to the resources table, which its caller gives.
   */
  attachRemover(fn: LambdaFunction): void {
    const functions = [this.sourceFunctionsArn, this.workflowFunctionsArn];
    fn.addToRolePolicy(new PolicyStatement({ actions: ["lambda:DeleteFunction"], resources: functions }));
    this.#attachSchedules(fn, "delete");
    this.attachDelayedEmitCanceller(fn);
    fn.addEnvironment(AWS_COMPUTE_ENV.stage, this.#props.stage);
    fn.addEnvironment(ENV.invocationTimeoutMs, String(this.#invocationTimeout.toMilliseconds()));
  }

  /** Invoke `functions` and wait for them (`GetFunction`); the stage and time limit that name and bound them. */
  #attachInvoker(fn: LambdaFunction, functions: string[]): void {
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["lambda:InvokeFunction", "lambda:GetFunction"], resources: functions }),
    );
    fn.addEnvironment(AWS_COMPUTE_ENV.stage, this.#props.stage);
    fn.addEnvironment(ENV.invocationTimeoutMs, String(this.#invocationTimeout.toMilliseconds()));
  }

  /** Read components' metadata: invoke the describer, and install their npm packages from the registry. */
  #attachDescriber(fn: LambdaFunction): void {
    this.describer.grantInvoke(fn);
    fn.addEnvironment(AWS_COMPUTE_ENV.describerFunction, this.describer.functionName);
    if (this.#props.npmRegistry !== undefined) fn.addEnvironment(ENV.npmRegistry, this.#props.npmRegistry);
  }

  /**
   * Create and update `functions` with the runtime layer and the source role only (a workflow's
   * function has the same logging-only role), and the settings they are created with.
   */
  #attachFunctionCreator(fn: LambdaFunction, functions: string[]): void {
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: [
          "lambda:CreateFunction",
          "lambda:UpdateFunctionCode",
          "lambda:UpdateFunctionConfiguration",
          // CreateFunction with tags needs it.
          "lambda:TagResource",
        ],
        resources: functions,
      }),
    );
    // Creating a function with a layer needs read access to that layer version.
    fn.addToRolePolicy(
      new PolicyStatement({ actions: ["lambda:GetLayerVersion"], resources: [this.runtimeLayer.layerVersionArn] }),
    );
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["iam:PassRole"],
        resources: [this.sourceRole.roleArn],
        conditions: { StringEquals: { "iam:PassedToService": "lambda.amazonaws.com" } },
      }),
    );
    fn.addEnvironment(AWS_COMPUTE_ENV.sourceRoleArn, this.sourceRole.roleArn);
    fn.addEnvironment(AWS_COMPUTE_ENV.runtimeLayerArn, this.runtimeLayer.layerVersionArn);
    fn.addEnvironment(AWS_COMPUTE_ENV.sourceLogGroup, this.sourceLogGroup.logGroupName);
  }

  /**
   * The timers' schedules of the group: deleted only (`delete`), or also created and updated with
   * the scheduler role (`manage`). Both learn the schedules' settings, which name, not grant.
   */
  #attachSchedules(fn: LambdaFunction, rights: "delete" | "manage"): void {
    fn.addToRolePolicy(
      new PolicyStatement({
        actions:
          rights === "manage"
            ? ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"]
            : ["scheduler:DeleteSchedule"],
        resources: [this.#schedulesArn()],
      }),
    );
    if (rights === "manage") {
      fn.addToRolePolicy(
        new PolicyStatement({
          actions: ["iam:PassRole"],
          resources: [this.schedulerRole.roleArn],
          conditions: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } },
        }),
      );
    }
    fn.addEnvironment(AWS_COMPUTE_ENV.timerInvokerArn, this.timerInvoker.lambdaFunction.functionArn);
    fn.addEnvironment(AWS_COMPUTE_ENV.schedulerRoleArn, this.schedulerRole.roleArn);
    fn.addEnvironment(AWS_COMPUTE_ENV.scheduleGroup, this.scheduleGroup.ref);
  }

  /** Every schedule of the stack's group (timers', delayed emits' and paused runs'). */
  #schedulesArn(): string {
    return Stack.of(this).formatArn({
      service: "scheduler",
      resource: "schedule",
      resourceName: `${this.scheduleGroup.ref}/*`,
      arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
    });
  }

  /**
   * A function that serves runs' `$.files` calls: it signs URLs to read and write the objects of
   * the File Store bucket (a pre-signed URL carries its signer's rights, so it has exactly those),
   * lists the bucket and deletes objects. Without a bucket (a stack given none) it gets nothing.
   */
  attachFileStore(fn: LambdaFunction): void {
    const bucket = this.#props.fileStoreBucket;
    if (!bucket) return;
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
        resources: [bucket.arnForObjects("*")],
      }),
    );
    fn.addToRolePolicy(new PolicyStatement({ actions: ["s3:ListBucket"], resources: [bucket.bucketArn] }));
    fn.addEnvironment(ENV.fileStoreBucket, bucket.bucketName);
    fn.addEnvironment(ENV.s3ExpectedOwner, Stack.of(this).account);
  }

  /**
   * A function that opens secret props (`kms:Decrypt`) and, with `seal`, seals new ones
   * (`kms:GenerateDataKey`).
   */
  attachSecrets(fn: LambdaFunction, options: { seal: boolean }): void {
    const key = this.#props.secretsKey;
    grantKeyUse(fn, key, options.seal ? ["kms:GenerateDataKey", "kms:Decrypt"] : ["kms:Decrypt"]);
    fn.addEnvironment(AWS_COMPUTE_ENV.secretsKeyArn, key.keyArn);
  }
}

function isHttpUrl(text: string): boolean {
  try {
    return ["http:", "https:"].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

/**
 * An identity policy on the function's role only. `key.grant(...)` would also edit the key's policy
 * in the stateful stack, a reference back from it to this stack; the key policy lets the
 * account's IAM policies grant use of the key instead.
 */
function grantKeyUse(grantee: IGrantable, key: IKey, actions: string[]): void {
  grantee.grantPrincipal.addToPrincipalPolicy(
    new PolicyStatement({ effect: Effect.ALLOW, actions, resources: [key.keyArn] }),
  );
}
