import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { HttpApi } from "aws-cdk-lib/aws-apigatewayv2";
import { AttributeType, TableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { IConstruct } from "constructs";
import { beforeAll, describe, expect, it } from "vitest";
import { routes } from "#http/routes";
import { EventStreaming } from "../../lib/constructs/event-streaming.ts";
import { PROJECT_ROOT } from "../../lib/constructs/sluice-function.ts";
import type { ServiceStack } from "../../lib/service-stack.ts";
import {
  LOG_RETENTION_DEFAULT_DAYS,
  logRetentionOf,
  MAX_DELIVERY_CONCURRENCY_DEFAULT,
  MAX_STREAMS_DEFAULT,
} from "../../lib/stack-settings.ts";
import {
  actionsOfRow,
  type FunctionRights,
  INTERNAL_RIGHTS,
  ROUTE_RIGHTS,
  renderRightsTable,
  TABLE,
} from "./function-rights.ts";
import {
  actionsOf,
  functionsOf,
  idOf,
  type Resource,
  type Statement,
  statementsOf,
  synthService,
} from "./service-template.ts";

const reservedOf = (template: Template, functionId: string): unknown =>
  functionsOf(template)[functionId]?.Properties.ReservedConcurrentExecutions;

/** The `MaximumConcurrency` of each SQS event source of a function. */
const deliveryConcurrencyOf = (template: Template, functionId: string): unknown[] =>
  (
    Object.values(
      template.findResources("AWS::Lambda::EventSourceMapping", { Properties: { FunctionName: { Ref: functionId } } }),
    ) as Resource[]
  ).map((mapping) => mapping.Properties.ScalingConfig?.MaximumConcurrency);

describe("ServiceStack: the rights of each function", () => {
  let service: ServiceStack;
  let template: Template;

  beforeAll(() => {
    ({ service, template } = synthService({ stage: "dev" }));
  });

  /** The construct of an internal function, by its name in the table. */
  const internal = (): Record<string, IConstruct> => ({
    "route-not-found": service.notFoundFunction.lambdaFunction,
    describer: service.sources.describer,
    "endpoint-function": service.sources.httpInterface.lambdaFunction,
    "timer-invoker": service.sources.timerInvoker.lambdaFunction,
    "source-runner": service.sources.sourceRunner.lambdaFunction,
    "source-stream": service.eventStreaming.streamFunction.lambdaFunction,
    "sse-redirect": service.eventStreaming.sseRedirect.lambdaFunction,
    "event-purger": service.eventStreaming.eventPurger.lambdaFunction,
    dispatcher: service.eventFanout.dispatcher.lambdaFunction,
    deliverer: service.eventFanout.deliverer.lambdaFunction,
    "deploy-sweeper": service.sources.deploySweeper.lambdaFunction,
    "delayed-emit-deliverer": service.sources.delayedEmitDeliverer.lambdaFunction,
    "paused-run-dispatcher": service.sources.pausedRunDispatcher.lambdaFunction,
    "deploy-finisher": service.sources.deployFinisher.lambdaFunction,
    "account-refresher": service.accountRefresher.refresher.lambdaFunction,
  });
  const idOfRow = (row: FunctionRights) => {
    const route = service.routeFunctions.get(row.name);
    const construct = route?.function.lambdaFunction ?? internal()[row.name];
    expect(construct, `no function named ${row.name}`).toBeDefined();
    return idOf(construct!);
  };
  const held = (id: string) => [...new Set(actionsOf(template, id))].sort();

  it("has a row for every function of the stack, and one only", () => {
    const rows = [...ROUTE_RIGHTS, ...INTERNAL_RIGHTS];
    expect(new Set(rows.map((row) => row.name)).size).toBe(rows.length);
    expect(ROUTE_RIGHTS.map((row) => row.name).sort()).toEqual(routes.map((route) => route.name).sort());
    expect(rows.map(idOfRow).sort()).toEqual(Object.keys(functionsOf(template)).sort());
  });

  it.each(ROUTE_RIGHTS.map((row) => [row.name, row] as const))("grants route %s exactly its actions", (_, row) => {
    expect(held(idOfRow(row))).toEqual(actionsOfRow(row));
  });

  it.each(INTERNAL_RIGHTS.map((row) => [row.name, row] as const))("grants the %s exactly its actions", (_, row) => {
    expect(held(idOfRow(row))).toEqual(actionsOfRow(row));
  });

  it("lets no route that only reads, nor POST /v1/components, create or delete functions, pass roles or touch schedules", () => {
    const describing = routes.filter((route) => route.method === "GET" || route.name === "create-component");
    expect(describing.map((route) => route.name)).toEqual(
      expect.arrayContaining(["get-component", "get-registry-component", "create-component"]),
    );
    const forbidden = /^(lambda:(Create|Delete|Update)Function|lambda:UpdateFunction|iam:PassRole|scheduler:)/;
    for (const route of describing) {
      const id = idOf(service.routeFunctions.get(route.name)!.function.lambdaFunction);
      expect(
        held(id).filter((action) => forbidden.test(action)),
        route.name,
      ).toEqual([]);
    }
  });

  it("gives no role a managed policy, nor any action on every resource (`*`)", () => {
    const roles = template.findResources("AWS::IAM::Role") as Record<string, Resource>;
    for (const [id, role] of Object.entries(roles)) expect(role.Properties.ManagedPolicyArns, id).toBeUndefined();
    const statements = (Object.values(template.findResources("AWS::IAM::Policy")) as Resource[]).flatMap(
      (policy) => policy.Properties.PolicyDocument.Statement as Statement[],
    );
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) {
      expect([statement.Resource].flat(), JSON.stringify(statement.Action)).not.toContain("*");
    }
    // Every function's logs go to its group only (its own, or the route functions' shared one).
    for (const [id, fn] of Object.entries(functionsOf(template))) {
      const group = { "Fn::GetAtt": [fn.Properties.LoggingConfig.LogGroup.Ref, "Arn"] };
      const logs = statementsOf(template, id).filter((statement) => JSON.stringify(statement.Action).includes("logs:"));
      expect(
        logs.map(({ Action, Resource }) => ({ Action, Resource })),
        id,
      ).toEqual([{ Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: group }]);
    }
  });

  it("keeps every log group 30 days by default, caps streams at 50 and each delivery queue's deliverer invocations at 10", () => {
    const groups = Object.values(template.findResources("AWS::Logs::LogGroup")) as Resource[];
    // The route functions share one group (decision 423); every other function has its own.
    expect(groups.length).toBeGreaterThan(10);
    for (const group of groups) expect(group.Properties.RetentionInDays).toBe(LOG_RETENTION_DEFAULT_DAYS);
    expect(reservedOf(template, idOf(service.eventStreaming.streamFunction.lambdaFunction))).toBe(MAX_STREAMS_DEFAULT);
    expect(deliveryConcurrencyOf(template, idOf(service.eventFanout.deliverer.lambdaFunction))).toEqual([
      MAX_DELIVERY_CONCURRENCY_DEFAULT,
      MAX_DELIVERY_CONCURRENCY_DEFAULT,
    ]);
    // Only the stream function reserves concurrency.
    const reserving = Object.entries(functionsOf(template)).filter(
      ([, fn]) => fn.Properties.ReservedConcurrentExecutions,
    );
    expect(reserving.map(([id]) => id)).toEqual([idOf(service.eventStreaming.streamFunction.lambdaFunction)]);
  });

  it("is the table docs/aws.md shows", () => {
    const docs = readFileSync(join(PROJECT_ROOT, "docs/aws.md"), "utf8");
    const byName = new Map(routes.map((route) => [route.name, route]));
    const table = renderRightsTable((name) => {
      const route = byName.get(name);
      return route ? `\`${route.method} ${route.path}\`` : name;
    });
    // On a mismatch, the message shows the table to paste into docs/aws.md.
    expect(docs.includes(table), `docs/aws.md should contain:\n\n${table}\n`).toBe(true);
  });
});

describe("ServiceStack with -c logRetentionDays, maxStreams and maxDeliveryConcurrency", () => {
  it("keeps logs, reserves stream concurrency and caps deliveries as told", () => {
    const { service, template } = synthService({
      logRetention: logRetentionOf("7"),
      maxStreams: 200,
      maxDeliveryConcurrency: 25,
    });
    const groups = Object.values(template.findResources("AWS::Logs::LogGroup")) as Resource[];
    for (const group of groups) expect(group.Properties.RetentionInDays).toBe(7);
    expect(reservedOf(template, idOf(service.eventStreaming.streamFunction.lambdaFunction))).toBe(200);
    expect(deliveryConcurrencyOf(template, idOf(service.eventFanout.deliverer.lambdaFunction))).toEqual([25, 25]);
  });

  it("reserves nothing for the stream with maxStreams unreserved, and refuses values Lambda or SQS would", () => {
    // EventStreaming alone: a whole stack's template is not needed to see its function.
    const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
    const stack = new Stack(app, "Streams");
    new EventStreaming(stack, "EventStreaming", {
      httpApi: new HttpApi(stack, "Api"),
      resourcesTable: new TableV2(stack, "Table", { partitionKey: { name: "pk", type: AttributeType.STRING } }),
      maxStreams: "unreserved",
    });
    const functions = Object.values(functionsOf(Template.fromStack(stack)));
    expect(functions.length).toBeGreaterThan(0);
    for (const fn of functions) expect(fn.Properties.ReservedConcurrentExecutions).toBeUndefined();
    expect(() => synthService({ maxStreams: 0 })).toThrow(/Invalid maxStreams 0/);
    expect(() => synthService({ maxDeliveryConcurrency: 1 })).toThrow(/Invalid maxDeliveryConcurrency 1/);
  });
});

describe("The table rights", () => {
  /** The IAM action of each DynamoDB request the stores send; TransactWrite is authorised item by item. */
  const ACTION_OF_COMMAND: Record<string, string[]> = {
    GetCommand: ["dynamodb:GetItem"],
    BatchGetCommand: ["dynamodb:BatchGetItem"],
    QueryCommand: ["dynamodb:Query"],
    PutCommand: ["dynamodb:PutItem"],
    UpdateCommand: ["dynamodb:UpdateItem"],
    DeleteCommand: ["dynamodb:DeleteItem"],
    BatchWriteCommand: ["dynamodb:BatchWriteItem"],
    TransactWriteCommand: ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
  };

  it("cover every request the DynamoDB stores send (a new kind of request needs its action granted)", () => {
    const folder = join(PROJECT_ROOT, "functions/adapters/aws");
    const sources = readdirSync(folder)
      .filter((file) => file.startsWith("dynamodb-"))
      .map((file) => readFileSync(join(folder, file), "utf8"));
    const commands = new Set(sources.flatMap((text) => [...text.matchAll(/new (\w+Command)\(/g)].map((m) => m[1]!)));
    expect(commands.size).toBeGreaterThan(5);
    for (const command of commands) {
      expect(ACTION_OF_COMMAND[command], `${command}: which IAM action does it need?`).toBeDefined();
      for (const action of ACTION_OF_COMMAND[command]!) expect(TABLE.write, command).toContain(action);
    }
    // A transaction's ConditionCheck item would need dynamodb:ConditionCheckItem.
    for (const text of sources) expect(text).not.toMatch(/\bConditionCheck:/);
  });
});
