import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { KMSClient } from "@aws-sdk/client-kms";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { S3Client } from "@aws-sdk/client-s3";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { SQSClient } from "@aws-sdk/client-sqs";
import { DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { streamLogger } from "#adapters/log-output";
import { npmPackagesPlugin } from "#adapters/npm/esbuild-plugin";
import { bundledNpmCli } from "#adapters/npm/npm-cli";
import { NPM_HOME_FOLDER } from "#adapters/npm/package-cache";
import { registryFiles } from "#adapters/registry-files";
import { UrlCodeFetcher } from "#adapters/url-code-fetcher";
import { loadAwsComputeConfig } from "#config/aws-compute-env";
import { loadAwsConfig } from "#config/env";
import { fallbackQueueNameFor } from "#config/shared-names";
import { systemClock } from "#core/ports/clock";
import type { Deps } from "#core/ports/deps";
import { randomIdGenerator } from "#core/ports/id-generator";
import { DynamoDbComponentStore } from "./dynamodb-component-store.ts";
import { DynamoDbDataStoreStore } from "./dynamodb-data-store-store.ts";
import { DynamoDbDeadLetterStore } from "./dynamodb-dead-letter-store.ts";
import { DynamoDbEventStore } from "./dynamodb-event-store.ts";
import { DynamoDbIdentityStore } from "./dynamodb-identity-store.ts";
import { DynamoDbSourceRunLock } from "./dynamodb-source-run-lock.ts";
import { DynamoDbSourceStore } from "./dynamodb-source-store.ts";
import { DynamoDbSubscriptionStore } from "./dynamodb-subscription-store.ts";
import { DynamoDbUsageStore } from "./dynamodb-usage-store.ts";
import { DynamoDbWorkflowRunStore } from "./dynamodb-workflow-run-store.ts";
import { DynamoDbWorkflowStore } from "./dynamodb-workflow-store.ts";
import { EventBridgeEventBus } from "./eventbridge-event-bus.ts";
import { KmsSecrets } from "./kms-secrets.ts";
import { LambdaComponentHost } from "./lambda-component-host.ts";
import { LambdaEventPurger } from "./lambda-event-purger.ts";
import { LambdaRunQueue } from "./lambda-run-queue.ts";
import { S3ObjectSink } from "./s3-object-sink.ts";
import { SchedulerTimers } from "./scheduler-timers.ts";
import { componentBundler, loadEsbuild } from "./source-bundle.ts";
import { SqsDeliveryQueue } from "./sqs-delivery-queue.ts";

let deps: Deps | undefined;

/** A document client that drops `undefined` attributes instead of failing on them. */
export function documentClient(client = new DynamoDBClient({})) {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/** `build()`, called once, on first use. */
function once<T>(build: () => T): () => T {
  let built: { value: T } | undefined;
  return () => {
    built ??= { value: build() };
    return built.value;
  };
}

/**
 * A port built on first use. A function is deployed with the settings and grants of the ports its
 * route uses only; building a port it was not deployed for fails at that use, naming the port and
 * the reason, instead of at the cold start of every function.
 *
 * A proxy rather than a getter on `Deps`, so that passing the port around, spreading or
 * destructuring `Deps`, or keying a WeakMap by the port (`loadComponent`) builds nothing. Methods
 * are bound to the built port, whose private fields a call through the proxy would not reach.
 */
function lazy<T extends object>(port: string, build: () => T): T {
  const instance = once(() => {
    try {
      return build();
    } catch (error) {
      throw new Error(`${port} could not be built: ${(error as Error).message}`, { cause: error });
    }
  });
  return new Proxy({} as T, {
    get(_target, member) {
      const target = instance() as Record<PropertyKey, unknown>;
      const value = target[member];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

function required<T>(value: T | undefined, port: string, why: string): T {
  if (value === undefined) throw new Error(`${port} is not available: this function was deployed without ${why}`);
  return value;
}

/**
 * The composition root on AWS, built once per Lambda container on first use: configuration is
 * read and validated then, and SDK clients are reused by every later invocation. Each port is
 * built when first used (see {@link lazy}), so the OpenAPI function never reads a table name and
 * a list route never builds a Lambda client.
 */
export function awsDeps(options: { resources: boolean }, env: Record<string, string | undefined> = process.env): Deps {
  deps ??= buildAwsDeps(options, env);
  return deps;
}

/** A new composition from `env`, not kept: {@link awsDeps} keeps the first one of a container. */
export function buildAwsDeps(options: { resources: boolean }, env: Record<string, string | undefined>): Deps {
  const config = loadAwsConfig(env, options);
  const compute = loadAwsComputeConfig(env);
  const table = () => required(config.resourcesTable, "the resources table", "table access");
  // SDK clients are made when the first port that uses them is built.
  const documents = once(() => documentClient());
  const lambda = once(() => new LambdaClient({}));
  const sqs = once(() => new SQSClient({}));
  const log = streamLogger({
    level: config.logLevel,
    format: "json",
    base: { function: env.AWS_LAMBDA_FUNCTION_NAME },
  });
  // The compute routes' bundles carry `registry/` and the shipped npm packages' `node_modules/`
  // next to their entry (lib/constructs/api-route-function.ts).
  const taskRoot = env.LAMBDA_TASK_ROOT ?? process.cwd();
  const npmCache = join(tmpdir(), "sluice-npm");

  return {
    identity: lazy("the identity store", () => new DynamoDbIdentityStore(documents(), table())),
    usage: lazy(
      "the usage store",
      () => new DynamoDbUsageStore(documents(), table(), { eventMaxAgeMs: config.eventMaxAgeMs }),
    ),
    components: lazy("the component store", () => new DynamoDbComponentStore(documents(), table())),
    sources: lazy("the source store", () => new DynamoDbSourceStore(documents(), table())),
    workflows: lazy("the workflow store", () => new DynamoDbWorkflowStore(documents(), table())),
    // Runs are kept as long as events: the same retention sets their TTL.
    workflowRuns: lazy(
      "the workflow run store",
      () =>
        new DynamoDbWorkflowRunStore(documents(), table(), {
          retention: { maxAgeMs: config.eventMaxAgeMs, keepPerChannel: 0 },
        }),
    ),
    events: lazy(
      "the event store",
      () =>
        new DynamoDbEventStore(documents(), table(), {
          retention: { maxAgeMs: config.eventMaxAgeMs, keepPerChannel: 0 },
        }),
    ),
    purger: lazy(
      "the event purger",
      () =>
        new LambdaEventPurger({
          lambda: lambda(),
          functionName: required(
            compute.eventPurgerFunction,
            "the event purger",
            "the event purger's name (access.eventPurges)",
          ),
        }),
    ),
    subscriptions: lazy("the subscription store", () => new DynamoDbSubscriptionStore(documents(), table())),
    deadLetters: lazy("the dead letter store", () => new DynamoDbDeadLetterStore(documents(), table())),
    dataStores: lazy("the data store store", () => new DynamoDbDataStoreStore(documents(), table())),
    // Functions that append events publish them on EventBridge, for subscribers (docs/aws.md), with
    // the queue named after the bus for entries EventBridge keeps refusing; no listener lives in a
    // Lambda container (the live stream polls the store), so the others need no bus.
    bus: compute.eventBusName
      ? lazy("the event bus", () => {
          const busName = required(compute.eventBusName, "the event bus", "the event bus's name");
          return new EventBridgeEventBus({
            eventBridge: new EventBridgeClient({}),
            busName,
            log,
            fallback: { sqs: sqs(), queue: { name: fallbackQueueNameFor(busName) } },
          });
        })
      : { publish: async () => {} },
    // Functions that apply runs only ask it about buckets; the deliverer writes (its S3 client is
    // made on the first put).
    objects: new S3ObjectSink({
      s3: lazy("the S3 client", () => new S3Client({})),
      buckets: config.s3Buckets,
      ...(config.s3ExpectedOwner ? { expectedOwner: config.s3ExpectedOwner } : {}),
    }),
    deliveries: lazy(
      "the delivery queue",
      () =>
        new SqsDeliveryQueue({
          sqs: sqs(),
          queueUrl: required(
            compute.deliveryQueueUrl,
            "the delivery queue",
            "the delivery queue's URL (access.deliveries)",
          ),
        }),
    ),
    secrets: lazy(
      "the secrets key",
      () =>
        new KmsSecrets({
          kms: new KMSClient({}),
          keyId: required(compute.secretsKeyArn, "the secrets key", "access to the secrets key"),
        }),
    ),
    host: lazy(
      "the component host",
      () =>
        new LambdaComponentHost({
          lambda: lambda(),
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
                    esbuild: () => loadEsbuild("wasm"),
                    plugins: [
                      npmPackagesPlugin({
                        shippedPackagesDir: join(taskRoot, "node_modules"),
                        // Lambda has no npm of its own: the bundled CLI installs under /tmp.
                        cacheDir: npmCache,
                        npmCli: bundledNpmCli(join(taskRoot, "node_modules")),
                        npmHome: join(npmCache, NPM_HOME_FOLDER),
                        // A failure names the package before the API's 30 s limit.
                        installTimeoutMs: 20_000,
                        ...(compute.npmRegistry ? { registry: compute.npmRegistry } : {}),
                      }),
                    ],
                  }),
                },
              }
            : {}),
        }),
    ),
    timers: lazy("the timers", () => {
      const schedules = required(compute.schedules, "the timers", "the schedules' settings (access.compute)");
      return new SchedulerTimers({
        scheduler: new SchedulerClient({}),
        groupName: schedules.scheduleGroup,
        timerInvokerArn: schedules.timerInvokerArn,
        roleArn: schedules.schedulerRoleArn,
      });
    }),
    runs: lazy(
      "the run queue",
      () =>
        new LambdaRunQueue({
          lambda: lambda(),
          functionName: required(compute.sourceRunnerFunction, "the run queue", "the source runner's name"),
        }),
    ),
    runLock: lazy("the source run lock", () => new DynamoDbSourceRunLock(documents(), table(), { clock: systemClock })),
    // Deployed, Sluice never fetches from private, loopback or metadata addresses for a user.
    fetcher: new UrlCodeFetcher({ allowPrivateAddresses: false }),
    registry: registryFiles(join(taskRoot, "registry")),
    clock: systemClock,
    ids: randomIdGenerator(systemClock),
    log,
    quotas: config.quotas,
    runtime: compute.runtime,
  };
}
