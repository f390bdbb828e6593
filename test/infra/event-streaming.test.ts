import { App, Duration, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { HttpApi } from "aws-cdk-lib/aws-apigatewayv2";
import { AttributeType, TableV2 } from "aws-cdk-lib/aws-dynamodb";
import { beforeAll, describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";
import { RESOURCES_TABLE } from "#config/shared-names";
import { routes } from "#http/routes";
import { EventStreaming, SSE_ROUTE_PATH, WORKFLOW_SSE_ROUTE_PATH } from "../../lib/constructs/event-streaming.ts";
import type { ServiceStack } from "../../lib/service-stack.ts";
import {
  actionsOf,
  DYNAMODB_WRITES,
  environmentOf,
  functionsOf,
  idOf,
  importOf,
  type Resource,
  statementsOf,
  synthService,
} from "./service-template.ts";

describe("ServiceStack: event history, deletion and the live stream", () => {
  let service: ServiceStack;
  let template: Template;
  let statefulTemplate: Template;

  beforeAll(() => {
    ({ service, template, statefulTemplate } = synthService());
  });

  const streamId = () => idOf(service.eventStreaming.streamFunction.lambdaFunction);
  const purgerId = () => idOf(service.eventStreaming.eventPurger.lambdaFunction);
  const redirectId = () => idOf(service.eventStreaming.sseRedirect.lambdaFunction);
  const urlId = () => idOf(service.eventStreaming.streamFunctionUrl);
  /** `https://` + the host of the function URL (its `FunctionUrl` attribute ends in `/`). */
  const streamBaseUrl = () => ({
    "Fn::Join": [
      "",
      ["https://", { "Fn::Select": [2, { "Fn::Split": ["/", { "Fn::GetAtt": [urlId(), "FunctionUrl"] }] }] }],
    ],
  });
  const tableName = () => importOf(statefulTemplate, { Ref: "Resources" });

  it("serves the stream from a public function URL in RESPONSE_STREAM mode", () => {
    template.resourceCountIs("AWS::Lambda::Url", 1);
    template.hasResourceProperties("AWS::Lambda::Url", {
      AuthType: "NONE",
      InvokeMode: "RESPONSE_STREAM",
      TargetFunctionArn: { "Fn::GetAtt": [streamId(), "Arn"] },
    });
    // Auth NONE needs both public permissions on the function (function URLs made since October 2025).
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunctionUrl",
      FunctionName: { "Fn::GetAtt": [streamId(), "Arn"] },
      FunctionUrlAuthType: "NONE",
      Principal: "*",
    });
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      FunctionName: { "Fn::GetAtt": [streamId(), "Arn"] },
      InvokedViaFunctionUrl: true,
      Principal: "*",
    });
  });

  it("runs the stream function from its entry for Lambda's 15 minutes, with the table, the poll interval and the end margin", () => {
    expect(service.eventStreaming.streamFunction.entry).toBe("functions/internal/source-stream-function.ts");
    const fn = functionsOf(template)[streamId()]!;
    expect(fn.Properties).toMatchObject({
      Handler: "index.handler",
      Runtime: "nodejs22.x",
      Architectures: ["arm64"],
      Timeout: 900,
      MemorySize: 256,
    });
    // MAX_STREAMS_DEFAULT: without a cap, open streams could take the account's whole concurrency.
    expect(fn.Properties.ReservedConcurrentExecutions).toBe(50);
    expect(environmentOf(template, streamId())).toEqual({
      [ENV.resourcesTable]: tableName(),
      [AWS_COMPUTE_ENV.streamPollMs]: "500",
      [AWS_COMPUTE_ENV.streamEndMarginMs]: "5000",
    });
  });

  it("lets the stream function read the table and do nothing else", () => {
    const actions = actionsOf(template, streamId());
    expect(actions).toContain("dynamodb:Query");
    expect(actions).toContain("dynamodb:GetItem");
    expect(actions.filter((action) => DYNAMODB_WRITES.includes(action))).toEqual([]);
    // Besides its own logs (function-rights.test.ts).
    expect(actions.filter((action) => !/^(dynamodb|logs):/.test(action))).toEqual([]);
  });

  it("outputs the stream base URL, the function URL without its trailing slash", () => {
    template.hasOutput("StreamUrl", { Value: streamBaseUrl() });
  });

  it("answers GET /sources/{id}/sse on the HTTP API with a function that knows the stream URL and nothing else", () => {
    const integrations = template.findResources("AWS::ApiGatewayV2::Integration", {
      Properties: { IntegrationUri: { "Fn::GetAtt": [redirectId(), "Arn"] }, PayloadFormatVersion: "2.0" },
    });
    expect(Object.keys(integrations)).toHaveLength(1);
    template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
      RouteKey: `GET ${SSE_ROUTE_PATH}`,
      Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
    });
    expect(SSE_ROUTE_PATH).toBe("/sources/{id}/sse");
    // A workflow's stream is redirected by the same function through the same integration.
    template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
      RouteKey: `GET ${WORKFLOW_SSE_ROUTE_PATH}`,
      Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
    });
    expect(WORKFLOW_SSE_ROUTE_PATH).toBe("/workflows/{workflow_id}/sse");
    const invokers = template.findResources("AWS::Lambda::Permission", {
      Properties: { FunctionName: { "Fn::GetAtt": [redirectId(), "Arn"] }, Principal: "apigateway.amazonaws.com" },
    });
    const sourceArns = Object.values(invokers).map((permission) => JSON.stringify(permission.Properties.SourceArn));
    expect(sourceArns).toHaveLength(2);
    expect(sourceArns.some((arn) => arn.includes("/workflows/{workflow_id}/sse"))).toBe(true);
    expect(environmentOf(template, redirectId())).toEqual({
      [AWS_COMPUTE_ENV.streamUrl]: streamBaseUrl(),
    });
    expect(actionsOf(template, redirectId())).toEqual(["logs:CreateLogStream", "logs:PutLogEvents"]);
  });

  it("runs the event purger for 15 minutes with read-write table access, retried twice when it fails", () => {
    expect(service.eventStreaming.eventPurger.entry).toBe("functions/internal/event-purger.ts");
    const fn = functionsOf(template)[purgerId()]!;
    expect(fn.Properties).toMatchObject({ Handler: "index.handler", Runtime: "nodejs22.x", Timeout: 900 });
    expect(environmentOf(template, purgerId())).toEqual({
      [ENV.resourcesTable]: tableName(),
    });
    const actions = actionsOf(template, purgerId());
    expect(actions).toEqual(
      expect.arrayContaining(["dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"]),
    );
    // Besides its own logs (function-rights.test.ts).
    expect(actions.filter((action) => !/^(dynamodb|logs):/.test(action))).toEqual([]);
    template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: purgerId() },
      MaximumRetryAttempts: 2,
    });
  });

  it("lets only the routes with access.eventPurges invoke the purger, and tells only them its name", () => {
    const starters = routes.filter((route) => route.access.eventPurges).map((route) => route.name);
    expect(starters).toEqual(["delete-source-events"]);
    const purgerArn = { "Fn::GetAtt": [purgerId(), "Arn"] };
    const functionIds = Object.keys(functionsOf(template));
    const invokers = functionIds.filter((id) =>
      statementsOf(template, id).some(
        (statement) =>
          [statement.Action].flat().includes("lambda:InvokeFunction") &&
          JSON.stringify(statement.Resource).includes(JSON.stringify(purgerArn)),
      ),
    );
    const deleteEventsId = idOf(service.routeFunctions.get("delete-source-events")!.function.lambdaFunction);
    expect(invokers).toEqual([deleteEventsId]);
    const invoke = statementsOf(template, deleteEventsId).filter((statement) =>
      [statement.Action].flat().some((action) => action.startsWith("lambda:")),
    );
    expect(invoke).toEqual([
      expect.objectContaining({
        Action: "lambda:InvokeFunction",
        Resource: [purgerArn, { "Fn::Join": ["", [purgerArn, ":*"]] }],
      }),
    ]);
    const named = functionIds.filter((id) => environmentOf(template, id)[AWS_COMPUTE_ENV.eventPurgerFunction]);
    expect(named).toEqual([deleteEventsId]);
    expect(environmentOf(template, deleteEventsId)[AWS_COMPUTE_ENV.eventPurgerFunction]).toEqual({ Ref: purgerId() });
  });

  it("removes items after their expiresAt time through the table's TTL", () => {
    expect(RESOURCES_TABLE.timeToLiveAttribute).toBe("expiresAt");
    statefulTemplate.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
      TimeToLiveSpecification: { AttributeName: "expiresAt", Enabled: true },
    });
  });
});

describe("EventStreaming settings and checks", () => {
  function standalone(props: Partial<ConstructorParameters<typeof EventStreaming>[2]> = {}) {
    const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
    const stack = new Stack(app, "Streams");
    const table = new TableV2(stack, "Table", { partitionKey: { name: "pk", type: AttributeType.STRING } });
    const streaming = new EventStreaming(stack, "EventStreaming", {
      httpApi: new HttpApi(stack, "Api"),
      resourcesTable: table,
      ...props,
    });
    return { streaming, template: Template.fromStack(stack) };
  }

  it("caps concurrent streams with reserved concurrency when maxStreams is given, and sets the poll interval and end margin", () => {
    const { streaming, template } = standalone({
      maxStreams: 50,
      pollInterval: Duration.seconds(2),
      endMargin: Duration.seconds(10),
    });
    const fn = (template.findResources("AWS::Lambda::Function") as Record<string, Resource>)[
      idOf(streaming.streamFunction.lambdaFunction)
    ]!;
    expect(fn.Properties.ReservedConcurrentExecutions).toBe(50);
    expect(fn.Properties.Environment.Variables[AWS_COMPUTE_ENV.streamPollMs]).toBe("2000");
    expect(fn.Properties.Environment.Variables[AWS_COMPUTE_ENV.streamEndMarginMs]).toBe("10000");
  });

  it("fails at synth when a route starts purges but may not write to the table", () => {
    const route = {
      name: "purge-only",
      method: "DELETE" as const,
      path: "/v1/purge",
      access: { resources: "read" as const, eventPurges: true },
    };
    expect(() => synthService({ routes: [route] })).toThrow(
      /starts event purges, which needs access.resources "write"/,
    );
  });

  it("fails at synth when a manifest route claims the stream's redirect path", () => {
    const route = {
      name: "get-me",
      method: "GET" as const,
      path: "/sources/{id}/sse",
      access: { resources: "read" as const },
    };
    expect(() => synthService({ routes: [route] })).toThrow(/the live stream's redirect/);
  });
});
