import { Duration, Stack } from "aws-cdk-lib";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import { EventBus, Rule } from "aws-cdk-lib/aws-events";
import { LambdaFunction as LambdaTarget } from "aws-cdk-lib/aws-events-targets";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { SqsDestination } from "aws-cdk-lib/aws-lambda-destinations";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { DeduplicationScope, FifoThroughputLimit, Queue, QueueEncryption, type QueueProps } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE, fallbackQueueNameFor, SQS_MAX_MESSAGE_BYTES } from "#config/shared-names";
import { isBucketName } from "#core/ports/object-sink";
import { MAX_DELIVERY_CONCURRENCY_DEFAULT } from "../stack-settings.ts";
import { SluiceFunction } from "./sluice-function.ts";
import type { SourceCompute } from "./source-compute.ts";
import { grantTableAccess } from "./table-access.ts";

/** Time limit of the deliverer: a FIFO batch's deliveries to one webhook go one after the other. */
const DELIVERER_TIMEOUT = Duration.seconds(90);
/** Messages of the delivery queues in one invocation of the deliverer. */
export const DELIVERY_BATCH_SIZE = 5;
export const RETRY_BATCH_SIZE = 10;
/** Receives of a message Sluice failed to handle (a store, a key, a queue) before its dead-letter queue. */
export const MAX_RECEIVES = 5;
/** Time limit of the dispatcher. */
const DISPATCHER_TIMEOUT = Duration.seconds(60);
/** Messages of the unpublished-events queue in one invocation of the dispatcher. */
export const UNPUBLISHED_BATCH_SIZE = 10;

export interface EventFanoutProps {
  /** The resources table: sources and subscriptions (read), webhooks and dead letters (read, write). */
  readonly resourcesTable: ITableV2;
  /** What sources run on: the dispatcher queues runs on its runner; the deliverer opens signing secrets with its key. */
  readonly sources: SourceCompute;
  /** Stage of the deployment: the bus is `sluice-<stage>`. */
  readonly stage: string;
  /** @default RetentionDays.ONE_MONTH */
  readonly logRetention?: RetentionDays;
  /**
   * At most this many deliverer invocations at once per delivery queue (the delivery queue and the
   * retry queue each; SQS event sources' `MaximumConcurrency`, 2 to 1000): bounds the load on the
   * table and the account's concurrency when a backlog drains. @default MAX_DELIVERY_CONCURRENCY_DEFAULT (10)
   */
  readonly maxDeliveryConcurrency?: number;
  /**
   * Buckets a workflow's `$.send.s3` may write to (`-c s3Buckets=a,b`): the deliverer may put
   * objects in them, and every function that applies runs learns them (`SLUICE_S3_BUCKETS`).
   * @default none: no grant, and every `$.send.s3` is refused
   */
  readonly s3Buckets?: readonly string[];
}

/**
 * Subscriptions and webhook delivery on AWS (docs/aws.md, "Subscriptions and webhook delivery on
 * AWS"):
 *
 * - the **bus** `sluice-<stage>`, on which functions that append events publish them
 *   ({@link attachPublisher}), and a **rule** that hands every such entry to
 * - the **dispatcher** (`functions/internal/event-dispatcher.ts`), which resolves subscriptions,
 *   queues runs of listening sources and sends webhook deliveries to
 * - the FIFO **delivery queue** (one message group per webhook or workflow; also fed by dead-letter
 *   replays and by the functions that apply workflow runs, {@link attachDeliveryQueuer}), consumed by
 * - the **deliverer** (`functions/internal/webhook-deliverer.ts`), which sends failed attempts to
 *   the **retry queue**, delayed until they are due, and consumes it too;
 * - the **unpublished-events queue** (`sluice-<stage>-unpublished-events`), where functions that
 *   publish send the entries EventBridge kept refusing ({@link attachPublisher}); the dispatcher
 *   consumes it too, so such events are routed later rather than never;
 * - a dead-letter queue for each stage, for what Sluice itself failed to handle: entries the rule
 *   could not hand over, dispatches that failed every retry and queued entries that failed 5
 *   dispatches ({@link dispatchDeadLetterQueue}; moved back to the unpublished-events queue, every
 *   message is dispatched again), deliveries the deliverer failed 5 times (one per delivery queue).
 *   A receiver that keeps failing ends in the dead-letter *store* instead, which users list and
 *   replay through the API.
 */
export class EventFanout extends Construct {
  readonly bus: EventBus;
  readonly rule: Rule;
  readonly dispatcher: SluiceFunction;
  /** Entries the rule could not hand to the dispatcher, dispatches that failed every retry, unpublished entries that failed 5 dispatches. */
  readonly dispatchDeadLetterQueue: Queue;
  /** Standard; entries EventBridge refused, sent by the publishers and consumed by the dispatcher. */
  readonly unpublishedQueue: Queue;
  /** FIFO; one message group per webhook. */
  readonly deliveryQueue: Queue;
  readonly deliveryDeadLetterQueue: Queue;
  /** Standard; failed deliveries wait here, delayed, for their next attempt. */
  readonly retryQueue: Queue;
  readonly retryDeadLetterQueue: Queue;
  readonly deliverer: SluiceFunction;

  constructor(scope: Construct, id: string, props: EventFanoutProps) {
    super(scope, id);
    const { resourcesTable, sources } = props;

    const busName = `sluice-${props.stage}`;
    this.bus = new EventBus(this, "Bus", {
      eventBusName: busName,
      description: "Sluice: events stored by sources, for their subscribers",
    });

    const common: QueueProps = {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    };
    this.dispatchDeadLetterQueue = new Queue(this, "DispatchDeadLetters", common);
    this.deliveryDeadLetterQueue = new Queue(this, "DeliveryDeadLetters", { ...common, fifo: true });
    this.retryDeadLetterQueue = new Queue(this, "RetryDeadLetters", common);
    const consumed: QueueProps = {
      ...common,
      // A delivery may carry an event of 256 KiB twice (`event` and `e`).
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
      // Lambda's advice for queues it polls: six times the function's timeout.
      visibilityTimeout: Duration.seconds(DELIVERER_TIMEOUT.toSeconds() * 6),
    };
    this.deliveryQueue = new Queue(this, "Deliveries", {
      ...consumed,
      fifo: true,
      // Deduplication ids are set per message (the delivery id and when it is due).
      contentBasedDeduplication: false,
      // High-throughput FIFO: limits and deduplication per webhook, not per queue.
      deduplicationScope: DeduplicationScope.MESSAGE_GROUP,
      fifoThroughputLimit: FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
      deadLetterQueue: { queue: this.deliveryDeadLetterQueue, maxReceiveCount: MAX_RECEIVES },
    });
    this.retryQueue = new Queue(this, "Retries", {
      ...consumed,
      deadLetterQueue: { queue: this.retryDeadLetterQueue, maxReceiveCount: MAX_RECEIVES },
    });

    this.unpublishedQueue = new Queue(this, "UnpublishedEvents", {
      ...common,
      queueName: fallbackQueueNameFor(busName),
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
      visibilityTimeout: Duration.seconds(DISPATCHER_TIMEOUT.toSeconds() * 6),
      deadLetterQueue: { queue: this.dispatchDeadLetterQueue, maxReceiveCount: MAX_RECEIVES },
    });

    this.dispatcher = new SluiceFunction(this, "Dispatcher", {
      entry: "functions/internal/event-dispatcher.ts",
      description: "Routes stored events to their subscribers (functions/internal/event-dispatcher.ts)",
      timeout: DISPATCHER_TIMEOUT,
      environment: { [ENV.resourcesTable]: resourcesTable.tableName },
      logRetention: props.logRetention,
    });
    const dispatcherFn = this.dispatcher.lambdaFunction;
    // Reads sources, subscriptions and referenced events; writes nothing.
    grantTableAccess(resourcesTable, dispatcherFn, "read");
    sources.attachRunQueuer(dispatcherFn);
    this.attachDeliveryQueuer(dispatcherFn);
    // A dispatch is repeatable (its deliveries are deduplicated): retried twice, then kept.
    dispatcherFn.configureAsyncInvoke({
      retryAttempts: 2,
      onFailure: new SqsDestination(this.dispatchDeadLetterQueue),
    });
    // What EventBridge refused is dispatched from the queue; a failed message is handed over again.
    dispatcherFn.addEventSource(
      new SqsEventSource(this.unpublishedQueue, {
        batchSize: UNPUBLISHED_BATCH_SIZE,
        reportBatchItemFailures: true,
      }),
    );

    this.rule = new Rule(this, "StoredEvents", {
      eventBus: this.bus,
      description: "Every stored event, to the dispatcher",
      eventPattern: { source: [EVENT_SOURCE], detailType: [EVENT_DETAIL_TYPE] },
      targets: [
        new LambdaTarget(dispatcherFn, {
          // EventBridge's own bounds, stated: an entry it cannot hand over within a day is kept.
          retryAttempts: 185,
          maxEventAge: Duration.hours(24),
          deadLetterQueue: this.dispatchDeadLetterQueue,
        }),
      ],
    });

    this.deliverer = new SluiceFunction(this, "Deliverer", {
      entry: "functions/internal/webhook-deliverer.ts",
      description: "POSTs events to webhooks (functions/internal/webhook-deliverer.ts)",
      timeout: DELIVERER_TIMEOUT,
      environment: {
        [ENV.resourcesTable]: resourcesTable.tableName,
        [AWS_COMPUTE_ENV.deliveryRetryQueueUrl]: this.retryQueue.queueUrl,
      },
      logRetention: props.logRetention,
    });
    const delivererFn = this.deliverer.lambdaFunction;
    // Reads webhooks, stores dead letters.
    grantTableAccess(resourcesTable, delivererFn, "write");
    sources.attachSecrets(delivererFn, { seal: false });
    delivererFn.addToRolePolicy(
      new PolicyStatement({ actions: ["sqs:SendMessage"], resources: [this.retryQueue.queueArn] }),
    );
    const maxConcurrency = props.maxDeliveryConcurrency ?? MAX_DELIVERY_CONCURRENCY_DEFAULT;
    if (!Number.isInteger(maxConcurrency) || maxConcurrency < 2 || maxConcurrency > 1000) {
      throw new Error(`Invalid maxDeliveryConcurrency ${maxConcurrency}: use a whole number from 2 to 1000.`);
    }
    delivererFn.addEventSource(
      new SqsEventSource(this.deliveryQueue, {
        batchSize: DELIVERY_BATCH_SIZE,
        reportBatchItemFailures: true,
        maxConcurrency,
      }),
    );
    delivererFn.addEventSource(
      new SqsEventSource(this.retryQueue, {
        batchSize: RETRY_BATCH_SIZE,
        reportBatchItemFailures: true,
        maxConcurrency,
      }),
    );

    // The functions that run sources and workflows store their events, and queue the deliveries
    // of a workflow run's `$.send.http` and `$.send.s3` when they apply it.
    for (const fn of [sources.httpInterface, sources.sourceRunner, sources.timerInvoker]) {
      this.attachPublisher(fn.lambdaFunction);
      this.attachDeliveryQueuer(fn.lambdaFunction);
    }
    // The delayed emit deliverer stores and publishes the emits that come due; it runs nothing.
    this.attachPublisher(sources.delayedEmitDeliverer.lambdaFunction);
    // The deploy finisher runs hooks, which emit.
    this.attachPublisher(sources.deployFinisher.lambdaFunction);

    // `$.send.s3`: the functions that apply runs check the bucket against the list (queueWorkflowSends),
    // and the deliverer writes, to these buckets' objects only. No bucket, no grant.
    const buckets = [...new Set(props.s3Buckets ?? [])];
    for (const bucket of buckets) {
      if (!isBucketName(bucket)) throw new Error(`Invalid S3 bucket name ${JSON.stringify(bucket)} in s3Buckets.`);
    }
    if (buckets.length > 0) {
      delivererFn.addToRolePolicy(
        new PolicyStatement({
          actions: ["s3:PutObject"],
          resources: buckets.map((bucket) => `arn:aws:s3:::${bucket}/*`),
        }),
      );
      for (const fn of [
        delivererFn,
        ...[sources.httpInterface, sources.sourceRunner, sources.timerInvoker].map((f) => f.lambdaFunction),
      ]) {
        fn.addEnvironment(ENV.s3Buckets, buckets.join(","));
      }
      // Only this account's buckets are written to, even if a listed one changes hands.
      delivererFn.addEnvironment(ENV.s3ExpectedOwner, Stack.of(this).account);
    }
  }

  /**
   * A function that appends events: may put events on the bus, and learns its name; may send what
   * EventBridge refuses to the unpublished-events queue, which it finds by its name (derived from
   * the bus's).
   */
  attachPublisher(fn: LambdaFunction): void {
    this.bus.grantPutEventsTo(fn);
    fn.addEnvironment(AWS_COMPUTE_ENV.eventBusName, this.bus.eventBusName);
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["sqs:GetQueueUrl", "sqs:SendMessage"],
        resources: [this.unpublishedQueue.queueArn],
      }),
    );
  }

  /**
   * A function that queues deliveries (`access.deliveries` routes, the dispatcher, the functions
   * that apply workflow runs): may send to the delivery queue, and learns its URL.
   */
  attachDeliveryQueuer(fn: LambdaFunction): void {
    fn.addToRolePolicy(new PolicyStatement({ actions: ["sqs:SendMessage"], resources: [this.deliveryQueue.queueArn] }));
    fn.addEnvironment(AWS_COMPUTE_ENV.deliveryQueueUrl, this.deliveryQueue.queueUrl);
  }
}
