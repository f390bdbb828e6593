/**
 * The offline deployment test (docs/aws.md, "The offline deployment test"): both stacks, as
 * `cdk synth` writes them, deployed into moto's CloudFormation with the transform of
 * `templates.ts` only; what was created checked through the services' own APIs; then Sluice's own
 * bundles, run on Node.js 22 by the local Lambda, serving requests through the HTTP API played
 * from the template's routes.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { DescribeTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DescribeEventBusCommand, EventBridgeClient, ListRulesCommand } from "@aws-sdk/client-eventbridge";
import { GetFunctionConfigurationCommand, LambdaClient, ListEventSourceMappingsCommand } from "@aws-sdk/client-lambda";
import { GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { DynamoDBDocumentClient, ScanCommand } from "@aws-sdk/lib-dynamodb";
import type { IConstruct } from "constructs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { apiClient } from "../support/api-client.ts";
import { createUserInTable, sourceToWebhookFlow } from "../support/aws-flow.ts";
import { WebhookReceiver } from "../support/webhook-receiver.ts";
import { matchRoute, routesOf } from "./gateway.ts";
import { type DeployedStack, MOTO_ACCOUNT, MOTO_CREDENTIALS, MOTO_REGION } from "./moto.ts";
import { node22, type OfflineStack, startOfflineStack } from "./offline-stack.ts";
import { offlineTemplate, SERVICE_STACK, type SluiceApp, STATEFUL_STACK } from "./templates.ts";

describe("Sluice deployed into moto and served offline", () => {
  let offline: OfflineStack;
  let app: SluiceApp;
  let synthesized: OfflineStack["synthesized"];
  let deployed: Record<string, DeployedStack>;
  let physicalIdOf: (construct: IConstruct) => string;
  const clientOptions = () => ({ endpoint: offline.moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });

  beforeAll(async () => {
    offline = await startOfflineStack();
    ({ app, synthesized, deployed, physicalIdOf } = offline);
  }, 300_000);

  afterAll(async () => {
    await offline?.close();
  });

  /** The functions' latest output, for a failing expectation's message. */
  const logs = () => offline.logs.slice(-40).join("\n");

  /** A user made by `sluice create-user --table` in the emulated table, as an operator does. */
  const createUser = (username: string) =>
    createUserInTable(
      {
        table: deployed[STATEFUL_STACK]?.outputs.ResourcesTableName ?? "",
        region: MOTO_REGION,
        endpoint: offline.moto.endpoint,
        env: {
          AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
        },
      },
      username,
    );

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
        sqsEndpoint: offline.moto.endpoint,
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
    // As deployed: the harness then moves them to its tap (played-triggers.ts).
    const Targets = offline.triggers.rules.get(`sluice-default/${Rules?.[0]?.Name}`)?.map((Arn) => ({ Arn }));
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

  describe("the HTTP API, played from the template's routes, on the functions' own bundles", () => {
    it("runs the bundles on Node.js 22, the runtime the stacks declare", async () => {
      const runtimes = Object.values(synthesized.service.Resources)
        .filter((resource) => resource.Type === "AWS::Lambda::Function")
        .map((resource) => resource.Properties?.Runtime);
      expect(new Set(runtimes)).toEqual(new Set(["nodejs22.x"]));
      const { stdout } = await promisify(execFile)(node22(), ["--version"]);
      expect(stdout).toMatch(/^v22\./);
    });

    it("serves GET /v1/openapi.json by its route's function", async () => {
      const response = await fetch(`${offline.gateway.endpoint}/v1/openapi.json`);
      expect(response.status, logs()).toBe(200);
      expect(await response.json()).toMatchObject({ openapi: expect.stringMatching(/^3\.1/) });
      const route = app.service.routeFunctions.get("get-openapi");
      expect(offline.lambda.invocations.at(-1)?.functionName).toBe(physicalIdOf(route!.function.lambdaFunction));
    });

    it("answers an unrouted request by the $default route's function, in Sluice's error shape", async () => {
      const response = await fetch(`${offline.gateway.endpoint}/v1/nowhere`);
      expect(response.status, logs()).toBe(404);
      expect(await response.json()).toEqual({ error: expect.stringContaining("/v1/nowhere") });
    });

    it("routes by the template alone: without the catch-all routes, a source endpoint reaches $default", () => {
      const names = new Map(deployed[SERVICE_STACK]?.resources.map((r) => [r.logicalId, r.physicalId]));
      const endpointFunction = physicalIdOf(app.service.sources.httpInterface.lambdaFunction);
      expect(matchRoute(routesOf(synthesized.service, names), "POST", "/http/abc")?.route.functionName).toBe(
        endpointFunction,
      );
      expect(matchRoute(routesOf(synthesized.service, names), "GET", "/http/abc/deeper/path")?.pathParameters).toEqual({
        key: "abc",
        proxy: "deeper/path",
      });
      const withoutCatchAll = structuredClone(synthesized.service);
      for (const [id, resource] of Object.entries(withoutCatchAll.Resources)) {
        if (resource.Type === "AWS::ApiGatewayV2::Route" && String(resource.Properties?.RouteKey).includes("/http/")) {
          delete withoutCatchAll.Resources[id];
        }
      }
      const fallback = matchRoute(routesOf(withoutCatchAll, names), "POST", "/http/abc");
      expect(fallback?.route.routeKey).toBe("$default");
    });

    it("authenticates a user that `sluice create-user --table` made in the emulated table", async () => {
      const user = await createUser("offline");
      const api = apiClient(`${offline.gateway.endpoint}/v1`, user.api_key);
      const me = await api("GET", "/users/me");
      expect(me.status, `${JSON.stringify(me.json)}\n${logs()}`).toBe(200);
      expect(JSON.stringify(me.json)).toContain(user.user_id);
      const anonymous = await fetch(`${offline.gateway.endpoint}/v1/users/me`);
      expect(anonymous.status).toBe(401);
    });
  });

  describe("a flow through the emulated services", () => {
    let receiver: WebhookReceiver | undefined;
    afterAll(async () => {
      await receiver?.stop();
    });

    it("deploys a source by its route, and delivers an HTTP event to a subscribed webhook through the table, the bus and the queues", async () => {
      // On 127.0.0.1, which the harness lets the deliverer reach (SLUICE_WEBHOOK_ALLOW_PRIVATE).
      receiver = await WebhookReceiver.start(0);
      const { sourceId, eventId } = await sourceToWebhookFlow({
        apiUrl: `${offline.gateway.endpoint}/v1`,
        apiKey: (await createUser("flow")).api_key,
        receiver,
        receiverUrl: receiver.url(),
        timeoutMs: 60_000,
        diagnostics: logs,
      });

      // The event is the one item under the source's partitions of the emulated table.
      const dynamodb = DynamoDBDocumentClient.from(new DynamoDBClient(clientOptions()));
      const stored = await dynamodb.send(
        new ScanCommand({
          TableName: deployed[STATEFUL_STACK]?.outputs.ResourcesTableName,
          FilterExpression: "begins_with(pk, :pk)",
          ExpressionAttributeValues: { ":pk": `EVT#${sourceId}#` },
        }),
      );
      expect(stored.Items?.map((item) => item.id)).toEqual([eventId]);

      // Published on the bus the harness taps, through the functions of the fan-out.
      expect(JSON.stringify(offline.triggers.published)).toContain(eventId);
      const invoked = new Set(offline.lambda.invocations.map((invocation) => invocation.functionName));
      for (const fn of [
        app.service.sources.httpInterface,
        app.service.sources.sourceRunner,
        app.service.eventFanout.dispatcher,
        app.service.eventFanout.deliverer,
      ]) {
        expect(invoked.has(physicalIdOf(fn.lambdaFunction)), fn.entry).toBe(true);
      }
      expect(offline.lambda.invocations.filter((invocation) => invocation.error)).toEqual([]);
    }, 240_000);
  });
});
