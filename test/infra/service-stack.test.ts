import { existsSync } from "node:fs";
import { join } from "node:path";
import { Match, type Template } from "aws-cdk-lib/assertions";
import { beforeAll, describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV, loadAwsComputeConfig } from "#config/aws-compute-env";
import { ENV, loadAwsConfig } from "#config/env";
import { routes } from "#http/routes";
import { routeKeyOf } from "../../lib/constructs/api-route-function.ts";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import type { ServiceStack } from "../../lib/service-stack.ts";
import {
  actionsOf,
  DYNAMODB_WRITES,
  deployedEnvironmentOf,
  environmentOf,
  functionsOf,
  idOf,
  importOf,
  synthService as synth,
} from "./service-template.ts";

describe("ServiceStack", () => {
  let service: ServiceStack;
  let template: Template;
  let statefulTemplate: Template;

  beforeAll(() => {
    ({ service, template, statefulTemplate } = synth());
  });

  const routeFunctionId = (name: string) => idOf(service.routeFunctions.get(name)!.function.lambdaFunction);
  const notFoundId = () => idOf(service.notFoundFunction.lambdaFunction);

  it("has one function per manifest route, one for $default, eight of sources, three of events, two of fan-out and the account refresher", () => {
    expect(routes.length).toBeGreaterThan(0);
    // Sources: the describer, the HTTP interface, the source runner, the timer invoker, the
    // deploy sweeper, the deploy finisher, the delayed emit deliverer and the paused-run
    // dispatcher. Events: the stream, its redirect and the purger. Fan-out: the dispatcher and the
    // webhook deliverer.
    template.resourceCountIs("AWS::Lambda::Function", routes.length + 1 + 8 + 3 + 2 + 1);
    expect([...service.routeFunctions.keys()].sort()).toEqual(routes.map((route) => route.name).sort());
  });

  it.each(routes.map((route) => [route.name, route] as const))(
    "runs %s from its file's handler export on Node.js 22, arm64, 512 MB and 10 s (1024 MB and 30 s to deploy sources)",
    (name, route) => {
      const entry = `functions/http/${name}.ts`;
      expect(service.routeFunctions.get(name)!.function.entry).toBe(entry);
      expect(existsSync(join(PROJECT_ROOT, entry))).toBe(true);
      const fn = functionsOf(template)[routeFunctionId(name)]!;
      expect(fn.Properties).toMatchObject({
        Handler: "index.handler",
        Runtime: "nodejs22.x",
        Architectures: ["arm64"],
        MemorySize: route.access.compute ? 1024 : 512,
        Timeout: route.access.compute ? 30 : 10,
        Description: `${route.method} ${route.path} (${entry})`,
      });
    },
  );

  it("lets no function reach private addresses: SLUICE_WEBHOOK_ALLOW_PRIVATE is set only by the offline test's harness", () => {
    const functions = Object.entries(functionsOf(template));
    expect(functions.length).toBeGreaterThan(0);
    for (const [id, fn] of functions) {
      expect(fn.Properties.Environment?.Variables?.[ENV.webhookAllowPrivate], id).toBeUndefined();
    }
  });

  it("runs the $default function from route-not-found.ts on Node.js 22", () => {
    expect(service.notFoundFunction.entry).toBe("functions/http/route-not-found.ts");
    const fn = functionsOf(template)[notFoundId()]!;
    expect(fn.Properties).toMatchObject({ Handler: "index.handler", Runtime: "nodejs22.x", Architectures: ["arm64"] });
  });

  it("routes every manifest METHOD /path to its own function with payload format 2.0", () => {
    for (const route of routes) {
      const integrations = template.findResources("AWS::ApiGatewayV2::Integration", {
        Properties: {
          IntegrationType: "AWS_PROXY",
          PayloadFormatVersion: "2.0",
          IntegrationUri: { "Fn::GetAtt": [routeFunctionId(route.name), "Arn"] },
        },
      });
      expect(Object.keys(integrations), route.name).toHaveLength(1);
      template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
        RouteKey: `${route.method} ${route.path}`,
        Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
      });
    }
  });

  it("sends unmatched requests through the $default route to the route-not-found function", () => {
    const integrations = template.findResources("AWS::ApiGatewayV2::Integration", {
      Properties: { IntegrationUri: { "Fn::GetAtt": [notFoundId(), "Arn"] } },
    });
    expect(Object.keys(integrations)).toHaveLength(1);
    template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
      RouteKey: "$default",
      Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
    });
    // Plus the two catch-all routes of sources' HTTP interfaces, paused runs' URLs and the streams'
    // two redirects.
    template.resourceCountIs("AWS::ApiGatewayV2::Route", routes.length + 1 + 2 + 1 + 2);
  });

  it("declares no route key with a trailing slash, which HTTP APIs refuse", () => {
    const keys = Object.values(template.findResources("AWS::ApiGatewayV2::Route")).map(
      (route) => route.Properties.RouteKey as string,
    );
    expect(keys.filter((key) => key.endsWith("/"))).toEqual([]);
  });

  it("grants routes that read resources read actions on the table and no write action", () => {
    const tableArn = importOf(statefulTemplate, { "Fn::GetAtt": ["Resources", "Arn"] });
    const readers = routes.filter((route) => route.access.resources === "read");
    expect(readers.length).toBeGreaterThan(0);
    for (const route of readers) {
      const actions = actionsOf(template, routeFunctionId(route.name));
      expect(actions, route.name).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:Query"]));
      expect(
        actions.filter((action) => DYNAMODB_WRITES.includes(action)),
        route.name,
      ).toEqual([]);
    }
    // The grants name the stateful stack's table, imported through its export.
    template.hasResourceProperties("AWS::IAM::Policy", {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: Match.arrayWith(["dynamodb:GetItem"]),
            Resource: tableArn,
          }),
        ]),
      },
    });
  });

  it("gives the openapi route and the $default function no DynamoDB action and no table name", () => {
    expect(routes.find((route) => route.name === "get-openapi")?.access.resources).toBeUndefined();
    for (const id of [routeFunctionId("get-openapi"), notFoundId()]) {
      expect(
        actionsOf(template, id).filter((action) => action.startsWith("dynamodb:")),
        id,
      ).toEqual([]);
      const fn = functionsOf(template)[id]!;
      expect(fn.Properties.Environment?.Variables ?? {}, id).toEqual({});
    }
  });

  it("sets the table's name and the API's URL (sources show their endpoints) on routes that use the table", () => {
    const tableName = importOf(statefulTemplate, { Ref: "Resources" });
    const apiUrl = { "Fn::GetAtt": [idOf(service.httpApi), "ApiEndpoint"] };
    const users = routes.filter((route) => route.access.resources);
    expect(users.length).toBeGreaterThan(0);
    for (const route of users) {
      const fn = functionsOf(template)[routeFunctionId(route.name)]!;
      const variables = fn.Properties.Environment.Variables;
      expect(variables[ENV.resourcesTable], route.name).toEqual(tableName);
      expect(variables[ENV.publicUrl], route.name).toEqual(apiUrl);
      // Routes that deploy or run sources (source-compute.test.ts), start purges
      // (event-streaming.test.ts) or queue deliveries (event-fanout.test.ts) learn more; the others nothing else.
      const { compute, secrets, eventPurges, deliveries } = route.access;
      if (!compute && !secrets && !eventPurges && !deliveries) {
        expect(variables, route.name).toEqual({
          [ENV.resourcesTable]: tableName,
          [ENV.publicUrl]: apiUrl,
        });
      }
    }
  });

  it("sets on every function only variables Sluice reads, each function's settings complete and valid", () => {
    const read = new Set<string>([...Object.values(ENV), ...Object.values(AWS_COMPUTE_ENV)]);
    for (const id of Object.keys(functionsOf(template))) {
      expect(
        Object.keys(environmentOf(template, id)).filter((name) => !read.has(name)),
        id,
      ).toEqual([]);
      // A group set in part, or a value out of range, would fail the function at its first request.
      const environment = deployedEnvironmentOf(template, id);
      expect(() => loadAwsComputeConfig(environment), id).not.toThrow();
      expect(() => loadAwsConfig(environment, { resources: false }), id).not.toThrow();
    }
  });

  it("logs the API's route functions to one group, every other function to its own, all kept 30 days, and deployed sources to one more", () => {
    template.resourceCountIs("AWS::Logs::LogGroup", 1 + 8 + 3 + 2 + 1 + 1);
    const routeLogs = idOf(service.routeLogGroup);
    for (const route of service.routeFunctions.values()) expect(idOf(route.function.logGroup)).toBe(routeLogs);
    expect(idOf(service.notFoundFunction.logGroup)).toBe(routeLogs);
    const groups = template.findResources("AWS::Logs::LogGroup", { Properties: { RetentionInDays: 30 } });
    const functions = Object.values(functionsOf(template));
    const used = functions.map((fn) => fn.Properties.LoggingConfig.LogGroup.Ref as string);
    const sourceLogs = idOf(service.sources.sourceLogGroup);
    expect([...new Set([...used, sourceLogs])].sort()).toEqual(Object.keys(groups).sort());
  });

  it("runs the account refresher every 5 minutes, with the app catalog and the table's name, no retries", () => {
    const refresher = service.accountRefresher.refresher;
    const fn = idOf(refresher.lambdaFunction);
    const rule = template.toJSON().Resources[idOf(service.accountRefresher.rule)];
    expect(rule.Properties).toMatchObject({ ScheduleExpression: "rate(5 minutes)", State: "ENABLED" });
    expect(rule.Properties.Targets).toEqual([
      expect.objectContaining({ Arn: { "Fn::GetAtt": [fn, "Arn"] }, RetryPolicy: { MaximumRetryAttempts: 0 } }),
    ]);
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      FunctionName: { "Fn::GetAtt": [fn, "Arn"] },
      Principal: "events.amazonaws.com",
      SourceArn: { "Fn::GetAtt": [idOf(service.accountRefresher.rule), "Arn"] },
    });
    expect(functionsOf(template)[fn]!.Properties).toMatchObject({
      Handler: "index.handler",
      Timeout: 300,
      Environment: { Variables: expect.objectContaining({ [ENV.resourcesTable]: expect.anything() }) },
    });
    expect(refresher.entry).toBe("functions/internal/account-refresher.ts");
    expect(refresher.bundledTrees.map((tree) => tree.to)).toEqual(["apps"]);
  });

  it("stays well below CloudFormation's 500 resources per stack (decision 423)", () => {
    const count = Object.keys(template.toJSON().Resources).length;
    expect(count, "time to split the route functions into nested stacks (decisions 423, 523)").toBeLessThanOrEqual(470);
  });

  it("outputs the API URL with the /v1 prefix", () => {
    template.hasOutput("ApiUrl", {
      Value: { "Fn::Join": ["", Match.arrayWith(["https://", Match.stringLikeRegexp("/v1$")])] },
    });
  });
});

describe("ServiceStack with routes other than the manifest's", () => {
  it("grants a write route read and write actions on the table", () => {
    const { service, template } = synth({
      routes: [{ name: "get-me", method: "POST", path: "/v1/users/me", access: { resources: "write" } }],
    });
    const actions = actionsOf(template, idOf(service.routeFunctions.get("get-me")!.function.lambdaFunction));
    expect(actions).toEqual(expect.arrayContaining(["dynamodb:GetItem", "dynamodb:Query", ...DYNAMODB_WRITES]));
  });

  it("declares a path the spec writes with a trailing slash on the bare path", () => {
    const route = { name: "get-me", method: "POST", path: "/v1/sources/", access: {} } as const;
    expect(routeKeyOf(route)).toBe("POST /v1/sources");
    const { template } = synth({ routes: [route] });
    template.hasResourceProperties("AWS::ApiGatewayV2::Route", { RouteKey: "POST /v1/sources" });
  });

  it("fails at synth when a route that deploys sources may not write to the table", () => {
    expect(() =>
      synth({
        routes: [
          {
            name: "create-source",
            method: "POST",
            path: "/v1/sources",
            access: { resources: "read", compute: "deploy" },
          },
        ],
      }),
    ).toThrow(/"create-source" has compute access, which needs access.resources "write"/);
  });

  it("fails at synth when two routes claim the same METHOD /path", () => {
    expect(() =>
      synth({
        routes: [
          { name: "get-me", method: "GET", path: "/v1/users/me", access: {} },
          { name: "get-workspace", method: "GET", path: "/v1/users/me/", access: {} },
        ],
      }),
    ).toThrow(/"get-me" and "get-workspace" both claim "GET \/v1\/users\/me"/);
  });
});
