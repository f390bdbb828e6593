/**
 * The offline deployment test (docs/aws.md, "The offline deployment test"): both stacks, as
 * `cdk synth` writes them, deployed into moto's CloudFormation with the transform of
 * `templates.ts` only, and what was created checked through the services' own APIs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  DescribeEventBusCommand,
  EventBridgeClient,
  ListRulesCommand,
  ListTargetsByRuleCommand,
} from "@aws-sdk/client-eventbridge";
import { GetFunctionConfigurationCommand, LambdaClient, ListEventSourceMappingsCommand } from "@aws-sdk/client-lambda";
import { GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { CfnElement } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import {
  type DeployedStack,
  deployStacks,
  MOTO_ACCOUNT,
  MOTO_CREDENTIALS,
  MOTO_REGION,
  type Moto,
  startMoto,
} from "./moto.ts";
import {
  type CfnTemplate,
  offlineTemplate,
  SERVICE_STACK,
  type SluiceApp,
  STATEFUL_STACK,
  synthSluice,
  templateOf,
} from "./templates.ts";

describe("the stacks deployed into moto", () => {
  let moto: Moto;
  let work: string;
  let app: SluiceApp;
  let synthesized: { stateful: CfnTemplate; service: CfnTemplate };
  let deployed: Record<string, DeployedStack>;
  const clientOptions = () => ({ endpoint: moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "sluice-aws-offline-"));
    app = synthSluice({ outdir: join(work, "cdk.out"), bundle: false });
    synthesized = { stateful: templateOf(app.stateful), service: templateOf(app.service) };
    moto = await startMoto();
    const endpoints = {
      apiEndpoint: "http://127.0.0.1:1",
      functionUrl: "http://127.0.0.1:2/",
      region: MOTO_REGION,
      account: MOTO_ACCOUNT,
    };
    deployed = await deployStacks(moto, work, {
      [STATEFUL_STACK]: offlineTemplate(synthesized.stateful, endpoints),
      [SERVICE_STACK]: offlineTemplate(synthesized.service, endpoints),
    });
  }, 240_000);

  afterAll(() => {
    moto?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** The physical id moto gave a construct's resource (its default child). */
  const physicalIdOf = (construct: IConstruct): string => {
    const logicalId = app.service.getLogicalId(construct.node.defaultChild as CfnElement);
    const resource = deployed[SERVICE_STACK]?.resources.find((r) => r.logicalId === logicalId);
    if (!resource) throw new Error(`${logicalId} was not deployed`);
    return resource.physicalId;
  };

  /** The physical ids of the template's resources of `type`, as moto created them. */
  const physicalIds = (stack: string, type: string) =>
    deployed[stack]?.resources.filter((resource) => resource.type === type).map((resource) => resource.physicalId) ??
    [];

  it("creates every resource of both stacks but those the transform removes", () => {
    for (const [name, template] of [
      [STATEFUL_STACK, synthesized.stateful],
      [SERVICE_STACK, synthesized.service],
    ] as const) {
      const stack = deployed[name];
      expect(stack?.status, `${name}: ${stack?.reason}`).toBe("CREATE_COMPLETE");
      const kept = offlineTemplate(template, {
        apiEndpoint: "http://x",
        functionUrl: "http://x/",
        region: MOTO_REGION,
        account: MOTO_ACCOUNT,
      }).Resources;
      expect(stack?.resources.map((resource) => resource.logicalId).sort()).toEqual(Object.keys(kept).sort());
      expect(stack?.resources.filter((resource) => resource.status !== "CREATE_COMPLETE")).toEqual([]);
    }
  });

  it("creates the resources table with its keys", async () => {
    const dynamodb = new DynamoDBClient(clientOptions());
    const tableName = deployed[STATEFUL_STACK]?.outputs.ResourcesTableName;
    const { Table } = await dynamodb.send(new DescribeTableCommand({ TableName: tableName }));
    expect(Table?.KeySchema).toEqual([
      { AttributeName: "pk", KeyType: "HASH" },
      { AttributeName: "sk", KeyType: "RANGE" },
    ]);
    expect(Table?.BillingModeSummary?.BillingMode).toBe("PAY_PER_REQUEST");
    // moto's CloudFormation does not apply TimeToLiveSpecification (docs/aws.md): no TTL check here.
  });

  it("gives every function the environment of its template, resolved against the stateful stack and the fan-out", async () => {
    const lambda = new LambdaClient(clientOptions());
    const sqs = new SQSClient(clientOptions());
    const tableName = deployed[STATEFUL_STACK]?.outputs.ResourcesTableName;
    const functions = Object.entries(synthesized.service.Resources).filter(
      ([, r]) => r.Type === "AWS::Lambda::Function",
    );
    expect(functions.length).toBeGreaterThan(40);
    const names = new Set(physicalIds(SERVICE_STACK, "AWS::Lambda::Function"));
    for (const [logicalId, resource] of functions) {
      const physicalId = deployed[SERVICE_STACK]?.resources.find((r) => r.logicalId === logicalId)?.physicalId;
      const configuration = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: physicalId }));
      expect(configuration.Runtime, logicalId).toBe((resource.Properties?.Runtime as string) ?? "");
      const expected =
        (resource.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
      const actual = configuration.Environment?.Variables ?? {};
      expect(Object.keys(actual).sort(), logicalId).toEqual(Object.keys(expected).sort());
      for (const [name, value] of Object.entries(expected)) {
        if (typeof value === "string") expect(actual[name], `${logicalId} ${name}`).toBe(value);
      }
      if (ENV.resourcesTable in actual) expect(actual[ENV.resourcesTable], logicalId).toBe(tableName);
      if (AWS_COMPUTE_ENV.eventBusName in actual) expect(actual[AWS_COMPUTE_ENV.eventBusName]).toBe("sluice-default");
      if (AWS_COMPUTE_ENV.sourceRunnerFunction in actual) {
        expect(names.has(actual[AWS_COMPUTE_ENV.sourceRunnerFunction] ?? ""), logicalId).toBe(true);
      }
      for (const queueVariable of [AWS_COMPUTE_ENV.deliveryQueueUrl, AWS_COMPUTE_ENV.deliveryRetryQueueUrl]) {
        const queueUrl = actual[queueVariable];
        if (queueUrl === undefined) continue;
        const { Attributes } = await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["All"] }),
        );
        expect(Attributes?.QueueArn, `${logicalId} ${queueVariable}`).toMatch(/^arn:aws:sqs:/);
      }
    }
  });

  it("creates the bus, its rule to the dispatcher, and the queues' mappings to their consumers", async () => {
    const events = new EventBridgeClient(clientOptions());
    const lambda = new LambdaClient(clientOptions());
    await events.send(new DescribeEventBusCommand({ Name: "sluice-default" }));
    const { Rules } = await events.send(new ListRulesCommand({ EventBusName: "sluice-default" }));
    expect(Rules).toHaveLength(1);
    const { Targets } = await events.send(
      new ListTargetsByRuleCommand({ Rule: Rules?.[0]?.Name, EventBusName: "sluice-default" }),
    );
    const fanout = app.service.eventFanout;
    const dispatcher = physicalIdOf(fanout.dispatcher.lambdaFunction);
    const deliverer = physicalIdOf(fanout.deliverer.lambdaFunction);
    expect(Targets?.map((target) => target.Arn)).toEqual([
      expect.stringMatching(new RegExp(`:function:${dispatcher}$`)),
    ]);

    const { EventSourceMappings } = await lambda.send(new ListEventSourceMappingsCommand({}));
    const mapped = (EventSourceMappings ?? []).map((mapping) => [
      mapping.EventSourceArn?.split(":").at(-1),
      mapping.FunctionArn?.split(":").at(-1),
    ]);
    // A queue's physical id is its URL, whose last segment is its name.
    const queueName = (queue: IConstruct) => physicalIdOf(queue).split("/").at(-1);
    expect(mapped.sort()).toEqual(
      [
        [queueName(fanout.deliveryQueue), deliverer],
        [queueName(fanout.retryQueue), deliverer],
        [queueName(fanout.unpublishedQueue), dispatcher],
      ].sort(),
    );
  });
});
