import { Match, type Template } from "aws-cdk-lib/assertions";
import { beforeAll, describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { EVENT_DETAIL_TYPE, EVENT_SOURCE, fallbackQueueNameFor } from "#config/shared-names";
import { routes } from "#http/routes";
import {
  DELIVERY_BATCH_SIZE,
  MAX_RECEIVES,
  RETRY_BATCH_SIZE,
  UNPUBLISHED_BATCH_SIZE,
} from "../../lib/constructs/event-fanout.ts";
import type { ServiceStack } from "../../lib/service-stack.ts";
import {
  actionsOf,
  DYNAMODB_WRITES,
  environmentOf,
  functionsOf,
  idOf,
  statementsWith as on,
  type Resource,
  statementsOf,
  synthService,
} from "./service-template.ts";

describe("ServiceStack: subscriptions and webhook delivery", () => {
  let service: ServiceStack;
  let template: Template;

  beforeAll(() => {
    ({ service, template } = synthService({ stage: "dev" }));
  });

  const fanout = () => service.eventFanout;
  const busId = () => idOf(fanout().bus);
  const dispatcherId = () => idOf(fanout().dispatcher.lambdaFunction);
  const delivererId = () => idOf(fanout().deliverer.lambdaFunction);
  const queueArn = (queue: Parameters<typeof idOf>[0]) => ({ "Fn::GetAtt": [idOf(queue), "Arn"] });
  const queues = () => template.findResources("AWS::SQS::Queue") as Record<string, Resource>;
  const routeId = (name: string) => idOf(service.routeFunctions.get(name)!.function.lambdaFunction);
  const busRules = () =>
    template.findResources("AWS::Events::Rule", { Properties: { EventBusName: { Ref: busId() } } });

  it("has a custom bus named after the stage, and a rule on it matching what the bus adapter publishes", () => {
    template.resourceCountIs("AWS::Events::EventBus", 1);
    template.hasResourceProperties("AWS::Events::EventBus", { Name: "sluice-dev" });
    expect([EVENT_SOURCE, EVENT_DETAIL_TYPE]).toEqual(["sluice.events", "event.stored"]);
    // The stack's other rule is the deploy sweeper's schedule (source-compute.test.ts), on the default bus.
    expect(Object.keys(busRules())).toHaveLength(1);
    template.hasResourceProperties("AWS::Events::Rule", {
      EventBusName: { Ref: busId() },
      EventPattern: { source: ["sluice.events"], "detail-type": ["event.stored"] },
      State: "ENABLED",
    });
  });

  it("targets the dispatcher with EventBridge's retry policy and a dead-letter queue, and lets only the rule invoke it", () => {
    const rule = Object.values(busRules())[0] as Resource;
    expect(rule.Properties.Targets).toEqual([
      expect.objectContaining({
        Arn: { "Fn::GetAtt": [dispatcherId(), "Arn"] },
        RetryPolicy: { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86_400 },
        DeadLetterConfig: { Arn: queueArn(fanout().dispatchDeadLetterQueue) },
      }),
    ]);
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      FunctionName: { "Fn::GetAtt": [dispatcherId(), "Arn"] },
      Principal: "events.amazonaws.com",
      SourceArn: { "Fn::GetAtt": [idOf(fanout().rule), "Arn"] },
    });
    // EventBridge may put what it could not hand over into the dead-letter queue, for this rule only.
    template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [{ Ref: idOf(fanout().dispatchDeadLetterQueue) }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: "sqs:SendMessage",
            Principal: { Service: "events.amazonaws.com" },
            Condition: { ArnEquals: { "aws:SourceArn": { "Fn::GetAtt": [idOf(fanout().rule), "Arn"] } } },
          }),
        ]),
      },
    });
  });

  it("retries a failed dispatch twice, then sends it to the same dead-letter queue", () => {
    template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: dispatcherId() },
      MaximumRetryAttempts: 2,
      DestinationConfig: { OnFailure: { Destination: queueArn(fanout().dispatchDeadLetterQueue) } },
    });
  });

  it("runs the dispatcher from its entry with the table (read only), the run queue and the delivery queue", () => {
    expect(fanout().dispatcher.entry).toBe("functions/internal/event-dispatcher.ts");
    expect(functionsOf(template)[dispatcherId()]!.Properties).toMatchObject({
      Handler: "index.handler",
      Runtime: "nodejs22.x",
      Architectures: ["arm64"],
      Timeout: 60,
    });
    expect(environmentOf(template, dispatcherId())).toEqual({
      [ENV.resourcesTable]: expect.objectContaining({ "Fn::ImportValue": expect.any(String) }),
      [AWS_COMPUTE_ENV.sourceRunnerFunction]: { Ref: idOf(service.sources.sourceRunner.lambdaFunction) },
      [AWS_COMPUTE_ENV.deliveryQueueUrl]: { Ref: idOf(fanout().deliveryQueue) },
    });
    const actions = actionsOf(template, dispatcherId());
    expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:Query"]));
    expect(actions.filter((action) => DYNAMODB_WRITES.includes(action))).toEqual([]);
    const statements = statementsOf(template, dispatcherId());
    expect(on(statements, "sqs:SendMessage").map((statement) => statement.Resource)).toEqual(
      expect.arrayContaining([queueArn(fanout().deliveryQueue), queueArn(fanout().dispatchDeadLetterQueue)]),
    );
    expect(JSON.stringify(on(statements, "lambda:InvokeFunction").map((s) => s.Resource))).toContain(
      idOf(service.sources.sourceRunner.lambdaFunction),
    );
    expect(actions.filter((action) => /^(events|kms|scheduler|iam):/.test(action))).toEqual([]);
    expect(on(statements, "lambda:InvokeFunction")).toHaveLength(1);
  });

  it("queues deliveries on a high-throughput FIFO queue deduplicated by message, with a FIFO dead-letter queue", () => {
    const delivery = queues()[idOf(fanout().deliveryQueue)]!;
    expect(delivery.Properties).toMatchObject({
      FifoQueue: true,
      ContentBasedDeduplication: false,
      DeduplicationScope: "messageGroup",
      FifoThroughputLimit: "perMessageGroupId",
      MaximumMessageSize: 1_048_576,
      MessageRetentionPeriod: 14 * 86_400,
      VisibilityTimeout: 540,
      SqsManagedSseEnabled: true,
      RedrivePolicy: {
        deadLetterTargetArn: queueArn(fanout().deliveryDeadLetterQueue),
        maxReceiveCount: MAX_RECEIVES,
      },
    });
    expect(queues()[idOf(fanout().deliveryDeadLetterQueue)]!.Properties).toMatchObject({
      FifoQueue: true,
      MessageRetentionPeriod: 14 * 86_400,
    });
  });

  it("holds failed deliveries in a standard retry queue, with its own dead-letter queue", () => {
    const retry = queues()[idOf(fanout().retryQueue)]!;
    expect(retry.Properties.FifoQueue).toBeUndefined();
    expect(retry.Properties).toMatchObject({
      MaximumMessageSize: 1_048_576,
      MessageRetentionPeriod: 14 * 86_400,
      VisibilityTimeout: 540,
      RedrivePolicy: { deadLetterTargetArn: queueArn(fanout().retryDeadLetterQueue), maxReceiveCount: MAX_RECEIVES },
    });
    // The fan-out's six, and the source runner's failed-runs queue (source-compute.ts).
    template.resourceCountIs("AWS::SQS::Queue", 7);
  });

  it("keeps what EventBridge refused in a standard queue named after the bus, which the dispatcher consumes", () => {
    const unpublished = queues()[idOf(fanout().unpublishedQueue)]!;
    expect(fallbackQueueNameFor("sluice-dev")).toBe("sluice-dev-unpublished-events");
    expect(unpublished.Properties.FifoQueue).toBeUndefined();
    expect(unpublished.Properties).toMatchObject({
      QueueName: "sluice-dev-unpublished-events",
      MaximumMessageSize: 1_048_576,
      MessageRetentionPeriod: 14 * 86_400,
      SqsManagedSseEnabled: true,
      // Six times the dispatcher's 60 s, as Lambda advises for queues it polls.
      VisibilityTimeout: 360,
      // A message that failed 5 dispatches joins the other undispatched entries.
      RedrivePolicy: {
        deadLetterTargetArn: queueArn(fanout().dispatchDeadLetterQueue),
        maxReceiveCount: MAX_RECEIVES,
      },
    });
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: queueArn(fanout().unpublishedQueue),
      FunctionName: { Ref: dispatcherId() },
      BatchSize: UNPUBLISHED_BATCH_SIZE,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
    expect(UNPUBLISHED_BATCH_SIZE).toBeLessThanOrEqual(10);
    const consumed = on(statementsOf(template, dispatcherId()), "sqs:ReceiveMessage").map((s) => s.Resource);
    expect(consumed).toEqual([queueArn(fanout().unpublishedQueue)]);
    const timeout = functionsOf(template)[dispatcherId()]!.Properties.Timeout as number;
    expect(unpublished.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * timeout);
  });

  it("refuses unencrypted connections to every queue", () => {
    for (const queue of [
      fanout().deliveryQueue,
      fanout().deliveryDeadLetterQueue,
      fanout().retryQueue,
      fanout().retryDeadLetterQueue,
      fanout().dispatchDeadLetterQueue,
      fanout().unpublishedQueue,
    ]) {
      template.hasResourceProperties("AWS::SQS::QueuePolicy", {
        Queues: [{ Ref: idOf(queue) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: "Deny", Condition: { Bool: { "aws:SecureTransport": "false" } } }),
          ]),
        },
      });
    }
  });

  it("feeds the deliverer from both queues in small batches that report failed items", () => {
    expect(fanout().deliverer.entry).toBe("functions/internal/webhook-deliverer.ts");
    // Two for the deliverer, one for the dispatcher (the unpublished-events queue).
    template.resourceCountIs("AWS::Lambda::EventSourceMapping", 3);
    for (const [queue, batchSize] of [
      [fanout().deliveryQueue, DELIVERY_BATCH_SIZE],
      [fanout().retryQueue, RETRY_BATCH_SIZE],
    ] as const) {
      template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
        EventSourceArn: queueArn(queue),
        FunctionName: { Ref: delivererId() },
        BatchSize: batchSize,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
      });
    }
    expect(DELIVERY_BATCH_SIZE).toBeLessThanOrEqual(10);
    // Lambda requires a polled queue's visibility timeout to be at least the function's timeout.
    const timeout = functionsOf(template)[delivererId()]!.Properties.Timeout as number;
    expect(timeout).toBe(90);
    for (const queue of [fanout().deliveryQueue, fanout().retryQueue]) {
      expect(queues()[idOf(queue)]!.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * timeout);
    }
  });

  it("lets the deliverer read webhooks, store dead letters, open signing secrets and send to the retry queue only", () => {
    expect(environmentOf(template, delivererId())).toEqual({
      [ENV.resourcesTable]: expect.objectContaining({ "Fn::ImportValue": expect.any(String) }),
      [AWS_COMPUTE_ENV.deliveryRetryQueueUrl]: { Ref: idOf(fanout().retryQueue) },
      [AWS_COMPUTE_ENV.secretsKeyArn]: expect.objectContaining({ "Fn::ImportValue": expect.any(String) }),
    });
    const statements = statementsOf(template, delivererId());
    const actions = statements.flatMap((statement) => [statement.Action].flat());
    expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:PutItem"]));
    expect(on(statements, "kms:Decrypt").map(({ Action, Resource }) => ({ Action, Resource }))).toEqual([
      { Action: "kms:Decrypt", Resource: expect.objectContaining({ "Fn::ImportValue": expect.any(String) }) },
    ]);
    expect(actions).not.toContain("kms:GenerateDataKey");
    expect(on(statements, "sqs:SendMessage").map((statement) => statement.Resource)).toEqual([
      queueArn(fanout().retryQueue),
    ]);
    // Consuming: receive and delete on the two queues it is fed from.
    expect(
      on(statements, "sqs:ReceiveMessage")
        .map((statement) => statement.Resource)
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    ).toEqual(
      [queueArn(fanout().deliveryQueue), queueArn(fanout().retryQueue)].sort((a, b) =>
        JSON.stringify(a).localeCompare(JSON.stringify(b)),
      ),
    );
    expect(actions.filter((action) => /^(events|lambda|scheduler|iam):/.test(action))).toEqual([]);
  });

  it("lets exactly the functions that store events put events on the bus, and tells them its name", () => {
    const busArn = { "Fn::GetAtt": [busId(), "Arn"] };
    // Probes (options, additionalProps) open secrets and accounts too, but store nothing they emit.
    const appendingRoutes = routes.filter(
      (route) => (route.access.compute === "deploy" || route.access.compute === "remove") && route.access.secrets,
    );
    // The workflow routes deploy, update and delete the sources of source triggers, whose hooks emit.
    expect(appendingRoutes.map((route) => route.name).sort()).toEqual([
      "create-source",
      "create-workflow",
      "delete-source",
      "delete-workflow",
      "update-source",
      "update-workflow",
    ]);
    const expected = [
      ...appendingRoutes.map((route) => routeId(route.name)),
      idOf(service.sources.httpInterface.lambdaFunction),
      idOf(service.sources.sourceRunner.lambdaFunction),
      idOf(service.sources.timerInvoker.lambdaFunction),
      // It stores and publishes delayed emits when they come due.
      idOf(service.sources.delayedEmitDeliverer.lambdaFunction),
      // It runs the hooks of the deploys handed to it, which emit.
      idOf(service.sources.deployFinisher.lambdaFunction),
      // It notes a refused account on the $errors of the sources that use it.
      idOf(service.accountRefresher.refresher.lambdaFunction),
    ].sort();
    const functionIds = Object.keys(functionsOf(template));
    const publishers = functionIds.filter((id) => on(statementsOf(template, id), "events:PutEvents").length > 0);
    expect(publishers.sort()).toEqual(expected);
    for (const id of publishers) {
      expect(on(statementsOf(template, id), "events:PutEvents").map((statement) => statement.Resource)).toEqual([
        busArn,
      ]);
    }
    const named = functionIds.filter((id) => environmentOf(template, id)[AWS_COMPUTE_ENV.eventBusName]);
    expect(named.sort()).toEqual(expected);
    for (const id of named) expect(environmentOf(template, id)[AWS_COMPUTE_ENV.eventBusName]).toEqual({ Ref: busId() });
    // The same functions, and they alone, may send to the unpublished-events queue (the dispatcher consumes it).
    const unpublishedArn = JSON.stringify(queueArn(fanout().unpublishedQueue));
    const fallingBack = functionIds.filter((id) =>
      on(statementsOf(template, id), "sqs:SendMessage").some(
        (statement) => JSON.stringify(statement.Resource) === unpublishedArn,
      ),
    );
    expect(fallingBack.sort()).toEqual(expected);
    for (const id of expected) {
      const onQueue = statementsOf(template, id).filter(
        (statement) => JSON.stringify(statement.Resource) === unpublishedArn,
      );
      expect(onQueue.flatMap((statement) => [statement.Action].flat()).sort()).toEqual([
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
      ]);
    }
  });

  it("lets the replay routes (access.deliveries), the dispatcher and the functions that apply runs send to the delivery queue, and no other function", () => {
    const replays = routes.filter((route) => route.access.deliveries).map((route) => route.name);
    expect(replays.sort()).toEqual([
      "replay-dead-letter",
      "replay-dead-letters",
      "replay-workflow-dead-letter",
      "replay-workflow-dead-letters",
    ]);
    const deliveryArn = JSON.stringify(queueArn(fanout().deliveryQueue));
    const functionIds = Object.keys(functionsOf(template));
    const senders = functionIds.filter((id) =>
      on(statementsOf(template, id), "sqs:SendMessage").some((statement) =>
        JSON.stringify(statement.Resource).includes(deliveryArn),
      ),
    );
    // The HTTP interface, the source runner and the timer invoker queue workflow runs' sends.
    const appliers = [service.sources.httpInterface, service.sources.sourceRunner, service.sources.timerInvoker].map(
      (fn) => idOf(fn.lambdaFunction),
    );
    expect(senders.sort()).toEqual([...replays.map(routeId), dispatcherId(), ...appliers].sort());
    for (const name of replays) {
      const sqs = statementsOf(template, routeId(name)).filter((statement) =>
        [statement.Action].flat().some((action) => action.startsWith("sqs:")),
      );
      expect(
        sqs.map(({ Action, Resource }) => ({ Action, Resource })),
        name,
      ).toEqual([{ Action: "sqs:SendMessage", Resource: queueArn(fanout().deliveryQueue) }]);
    }
    for (const id of [...replays.map(routeId), ...appliers]) {
      const onDeliveries = statementsOf(template, id).filter(
        (statement) => JSON.stringify(statement.Resource) === deliveryArn,
      );
      expect(
        onDeliveries.map(({ Action }) => Action),
        id,
      ).toEqual(["sqs:SendMessage"]);
      expect(environmentOf(template, id)[AWS_COMPUTE_ENV.deliveryQueueUrl], id).toEqual({
        Ref: idOf(fanout().deliveryQueue),
      });
    }
    const named = functionIds.filter((id) => environmentOf(template, id)[AWS_COMPUTE_ENV.deliveryQueueUrl]);
    expect(named.sort()).toEqual(senders.sort());
  });
});

describe("ServiceStack with routes that queue deliveries", () => {
  it("fails at synth when a route that queues deliveries may not write to the table", () => {
    expect(() =>
      synthService({
        routes: [
          {
            name: "replay-dead-letter",
            method: "POST",
            path: "/v1/webhooks/{id}/dead_letters/{delivery_id}/replay",
            access: { resources: "read", deliveries: true },
          },
        ],
      }),
    ).toThrow(/"replay-dead-letter" queues webhook deliveries, which needs access.resources "write"/);
  });
});

describe("ServiceStack: the buckets of $.send.s3", () => {
  // The deploying functions' npm tree cache is another bucket (source-compute.test.ts checks it).
  // The functions with buckets of the stack's own (file-stores.test.ts and source-compute.test.ts say what they get).
  const treeInstaller = (template: Template, id: string) =>
    environmentOf(template, id)[ENV.npmTreesBucket] !== undefined ||
    environmentOf(template, id)[ENV.fileStoreBucket] !== undefined;
  const s3Statements = (template: Template) =>
    Object.keys(functionsOf(template)).flatMap((id) =>
      statementsOf(template, id)
        .filter(() => environmentOf(template, id)[ENV.fileStoreBucket] === undefined)
        .filter((statement) => [statement.Action].flat().some((action) => action.startsWith("s3:")))
        .filter((statement) => !JSON.stringify(statement.Resource).includes("/npm-trees/"))
        .map((statement) => ({ id, Action: statement.Action, Resource: statement.Resource })),
    );

  it("grants no S3 access and sets no bucket list without -c s3Buckets", () => {
    const { template } = synthService({ stage: "dev" });
    expect(s3Statements(template)).toEqual([]);
    for (const id of Object.keys(functionsOf(template))) {
      expect(environmentOf(template, id)[ENV.s3Buckets], id).toBeUndefined();
      if (!treeInstaller(template, id)) expect(environmentOf(template, id)[ENV.s3ExpectedOwner], id).toBeUndefined();
    }
  });

  it("lets the deliverer alone put objects, in the listed buckets only, and tells the run appliers the list", () => {
    const { service, template } = synthService({ stage: "dev", s3Buckets: ["orders", "exports.acme", "orders"] });
    const deliverer = idOf(service.eventFanout.deliverer.lambdaFunction);
    expect(s3Statements(template)).toEqual([
      {
        id: deliverer,
        Action: "s3:PutObject",
        Resource: ["arn:aws:s3:::orders/*", "arn:aws:s3:::exports.acme/*"],
      },
    ]);
    const { httpInterface, sourceRunner, timerInvoker } = service.sources;
    const told = [deliverer, ...[httpInterface, sourceRunner, timerInvoker].map((fn) => idOf(fn.lambdaFunction))];
    for (const id of Object.keys(functionsOf(template))) {
      expect(environmentOf(template, id)[ENV.s3Buckets], id).toBe(
        told.includes(id) ? "orders,exports.acme" : undefined,
      );
      // Only the deliverer writes objects of users, and only to buckets of the stack's own account
      // (as the deploying functions write npm trees to the stack's own bucket).
      expect(environmentOf(template, id)[ENV.s3ExpectedOwner], id).toEqual(
        id === deliverer || treeInstaller(template, id) ? { Ref: "AWS::AccountId" } : undefined,
      );
    }
  });

  it("refuses a bucket name that is not one at synth", () => {
    expect(() => synthService({ s3Buckets: ["orders/*"] })).toThrow(/Invalid S3 bucket name "orders\/\*"/);
  });
});
