import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import type { CfnFunction } from "aws-cdk-lib/aws-lambda";
import { beforeAll, describe, expect, it } from "vitest";
import { buildAwsDeps } from "#adapters/aws/composition";
import { AWS_COMPUTE_ENV, loadAwsComputeConfig, SCHEDULES_ENV, SOURCE_FUNCTIONS_ENV } from "#config/aws-compute-env";
import { ENV, loadAwsConfig } from "#config/env";
import {
  APPS_ASSET,
  APPS_FILE_NAME,
  NPM_TREES_PREFIX,
  OPERATOR_APPS_FILE,
  REGISTRY_DIR_ASSET,
} from "#config/shared-names";
import { unpackComponentFiles } from "#core/component-files";
import type { LogLevel } from "#core/ports/logger";
import type { ComputeAccess } from "#http/route";
import { routes } from "#http/routes";
import { LAMBDA_ESBUILD_PACKAGE, LAMBDA_PACKAGES_DIR, lambdaEsbuildTree } from "../../lib/constructs/lambda-esbuild.ts";
import { stageRegistryDir } from "../../lib/constructs/registry-dir.ts";
import { SluiceFunction } from "../../lib/constructs/sluice-function.ts";
import { failedRunsQueueNameFor, NPM_TREES_EXPIRY } from "../../lib/constructs/source-compute.ts";
import type { ServiceStack } from "../../lib/service-stack.ts";
import { REGISTRY_TREE } from "../support/registry-tree.ts";
import {
  actionsOf,
  deployedEnvironmentOf,
  environmentOf,
  functionsOf,
  idOf,
  importOf,
  type Resource,
  roleIdOf,
  statementsOf,
  statementsOfRole,
  statementsWith,
  synthService,
} from "./service-template.ts";

/** `arn:…:function:sluice-dev-<prefix>_*` (`<prefix>*` for the run action's probes), as the stack writes it. */
const functionsArn = (prefix: "dc" | "p" | "p_0000000000") => ({
  "Fn::Join": [
    "",
    [
      "arn:",
      { Ref: "AWS::Partition" },
      ":lambda:",
      { Ref: "AWS::Region" },
      ":",
      { Ref: "AWS::AccountId" },
      `:function:sluice-dev-${prefix}${prefix.includes("_") ? "" : "_"}*`,
    ],
  ],
});
/** Sources' and workflows' functions, on the same terms: one statement names both. */
const COMPONENT_FUNCTIONS_ARNS = [functionsArn("dc"), functionsArn("p")];

describe("ServiceStack: what sources run on", () => {
  let service: ServiceStack;
  let template: Template;
  let statefulTemplate: Template;

  beforeAll(() => {
    ({ service, template, statefulTemplate } = synthService({ stage: "dev" }));
  });

  const functions = () => functionsOf(template);
  const routeFunctionId = (name: string) => idOf(service.routeFunctions.get(name)!.function.lambdaFunction);
  const computeRoutes = () => routes.filter((route) => route.access.compute);
  const routesAt = (...levels: ComputeAccess[]) =>
    routes.filter((route) => route.access.compute && levels.includes(route.access.compute));
  const layerId = () => idOf(service.sources.runtimeLayer);
  /** Every schedule of the stack's group, as the grants write it. */
  const schedulesArn = () => ({
    "Fn::Join": [
      "",
      [
        "arn:",
        { Ref: "AWS::Partition" },
        ":scheduler:",
        { Ref: "AWS::Region" },
        ":",
        { Ref: "AWS::AccountId" },
        ":schedule/",
        { Ref: idOf(service.sources.scheduleGroup) },
        "/*",
      ],
    ],
  });

  it("builds the runtime layer for Node.js 22 on arm64 and attaches it to no function of the stack", () => {
    template.resourceCountIs("AWS::Lambda::LayerVersion", 1);
    template.hasResourceProperties("AWS::Lambda::LayerVersion", {
      CompatibleRuntimes: ["nodejs22.x"],
      CompatibleArchitectures: ["arm64"],
    });
    for (const [id, fn] of Object.entries(functions())) expect(fn.Properties.Layers, id).toBeUndefined();
  });

  it("tells every route that creates source functions, and the deploy finisher, the layer's version ARN, and no other function", () => {
    expect(routesAt("probe", "run", "deploy").length).toBeGreaterThan(0);
    const computeIds = [
      ...routesAt("probe", "run", "deploy").map((route) => routeFunctionId(route.name)),
      idOf(service.sources.deployFinisher.lambdaFunction),
    ];
    for (const [id] of Object.entries(functions())) {
      const layer = environmentOf(template, id)[AWS_COMPUTE_ENV.runtimeLayerArn];
      if (computeIds.includes(id)) expect(layer, id).toEqual({ Ref: layerId() });
      else expect(layer, id).toBeUndefined();
    }
  });

  it("lets every function that runs sources take and free a $.service.db source's run lock in the resources table", () => {
    const runners = [
      idOf(service.sources.httpInterface.lambdaFunction),
      idOf(service.sources.sourceRunner.lambdaFunction),
      idOf(service.sources.timerInvoker.lambdaFunction),
      ...computeRoutes().map((route) => routeFunctionId(route.name)),
    ];
    for (const id of runners) {
      // DynamoDbSourceRunLock: a conditional PutItem to take the lease, a conditional DeleteItem to free it.
      expect(actionsOf(template, id), id).toEqual(expect.arrayContaining(["dynamodb:PutItem", "dynamodb:DeleteItem"]));
      expect(environmentOf(template, id)[ENV.resourcesTable], id).toBeDefined();
    }
  });

  it("has the deploy finisher invoked once per job, early enough to end before the sweep's bound, and told to deploying and removing routes only", () => {
    const finisher = idOf(service.sources.deployFinisher.lambdaFunction);
    // No retry (a hook could run twice); a job older than 10 minutes is dropped, and its source swept.
    template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: finisher },
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 600,
    });
    const timeout = functions()[finisher]!.Properties.Timeout as number;
    // Its function and two hooks of 30 s; 10 minutes in the queue and this end before 15 minutes.
    expect(timeout).toBe(120);
    expect(600 + timeout).toBeLessThan(15 * 60);
    const told = Object.keys(functions()).filter(
      (id) => environmentOf(template, id)[AWS_COMPUTE_ENV.deployFinisherFunction] !== undefined,
    );
    expect(told.sort()).toEqual(
      routesAt("deploy", "remove")
        .map((route) => routeFunctionId(route.name))
        .sort(),
    );
    // It reads no component's metadata: no describer.
    expect(environmentOf(template, finisher)[AWS_COMPUTE_ENV.describerFunction]).toBeUndefined();
  });

  it("warns at synth, and ships no binary, when esbuild's binary for Lambda was not fetched", () => {
    const stack = new Stack(new App(), "NoBinary");
    const empty = mkdtempSync(join(tmpdir(), "sluice-lambda-packages-"));
    expect(lambdaEsbuildTree(stack, empty)).toBeUndefined();
    Annotations.fromStack(stack).hasWarning(
      "/NoBinary",
      Match.stringLikeRegexp(`${LAMBDA_ESBUILD_PACKAGE}.*missing.*esbuild-wasm.*npm run fetch:lambda-esbuild`),
    );
  });

  it("runs the deploy sweeper every 5 minutes, with the rights DELETE /v1/sources/{id} has to remove a source", () => {
    const sweeper = idOf(service.sources.deploySweeper.lambdaFunction);
    const rule = idOf(service.sources.deploySweepRule);
    template.hasResource("AWS::Events::Rule", {
      Properties: { ScheduleExpression: "rate(5 minutes)", State: "ENABLED" },
    });
    const { Properties } = template.toJSON().Resources[rule] as Resource;
    expect(Properties).toMatchObject({ ScheduleExpression: "rate(5 minutes)", State: "ENABLED" });
    expect(Properties.Targets).toEqual([expect.objectContaining({ Arn: { "Fn::GetAtt": [sweeper, "Arn"] } })]);
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      FunctionName: { "Fn::GetAtt": [sweeper, "Arn"] },
      Principal: "events.amazonaws.com",
      SourceArn: { "Fn::GetAtt": [rule, "Arn"] },
    });
    const deleteRoute = routeFunctionId("delete-source");
    const removing = ["lambda:DeleteFunction", "scheduler:DeleteSchedule", "dynamodb:Query", "dynamodb:DeleteItem"];
    for (const id of [sweeper, deleteRoute])
      expect(actionsOf(template, id), id).toEqual(expect.arrayContaining(removing));
    // Removing only: it creates, invokes and passes nothing.
    for (const action of [
      "lambda:CreateFunction",
      "lambda:InvokeFunction",
      "iam:PassRole",
      "scheduler:CreateSchedule",
    ]) {
      expect(actionsOf(template, sweeper), action).not.toContain(action);
    }
    // The composition root builds its timers from the same settings as the route's.
    for (const name of [ENV.resourcesTable, AWS_COMPUTE_ENV.stage, ...SCHEDULES_ENV]) {
      expect(environmentOf(template, sweeper)[name], name).toEqual(environmentOf(template, deleteRoute)[name]);
    }
    expect(loadAwsComputeConfig(deployedEnvironmentOf(template, sweeper)).schedules).toBeDefined();
  });

  it("routes ANY /http/{key} and ANY /http/{key}/{proxy+} to the HTTP interface function", () => {
    const integrations = template.findResources("AWS::ApiGatewayV2::Integration", {
      Properties: { IntegrationUri: { "Fn::GetAtt": [idOf(service.sources.httpInterface.lambdaFunction), "Arn"] } },
    });
    expect(Object.keys(integrations)).toHaveLength(1);
    for (const routeKey of ["ANY /http/{key}", "ANY /http/{key}/{proxy+}"]) {
      template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
        RouteKey: routeKey,
        Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
      });
    }
  });

  it("routes ANY /flow/{run_id}/{secret}/{action}, a paused run's URLs, to the same function", () => {
    const integrations = template.findResources("AWS::ApiGatewayV2::Integration", {
      Properties: { IntegrationUri: { "Fn::GetAtt": [idOf(service.sources.httpInterface.lambdaFunction), "Arn"] } },
    });
    template.hasResourceProperties("AWS::ApiGatewayV2::Route", {
      RouteKey: "ANY /flow/{run_id}/{secret}/{action}",
      Target: { "Fn::Join": ["", ["integrations/", { Ref: Object.keys(integrations)[0] }]] },
      // No API key: the secret in the path is the proof, as for /http/{key}.
      AuthorizationType: "NONE",
    });
  });

  it("runs the paused-run dispatcher under its fixed name with the table and the runner, and no schedule, key or component", () => {
    const id = idOf(service.sources.pausedRunDispatcher.lambdaFunction);
    const fn = functions()[id]!;
    expect(fn.Properties.FunctionName).toBe("sluice-dev-paused-run-dispatcher");
    expect(Object.keys(environmentOf(template, id)).sort()).toEqual(
      [ENV.resourcesTable, AWS_COMPUTE_ENV.sourceRunnerFunction].sort(),
    );
    const invokes = statementsWith(statementsOf(template, id), "lambda:InvokeFunction");
    expect(JSON.stringify(invokes.map((statement) => statement.Resource))).toContain(
      idOf(service.sources.sourceRunner.lambdaFunction),
    );
    expect(actionsOf(template, id).filter((action) => /^(scheduler|iam|kms|events):/.test(action))).toEqual([]);
    expect(loadAwsComputeConfig(deployedEnvironmentOf(template, id)).pausedRuns).toBeUndefined();
  });

  it("lets the source runner pause runs (schedules invoking the dispatcher, updated when a run pauses again), and the workflow-deleting routes delete them", () => {
    const scheduleArn = JSON.stringify(schedulesArn());
    const runner = idOf(service.sources.sourceRunner.lambdaFunction);
    for (const action of ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"]) {
      expect(
        statementsWith(statementsOf(template, runner), action).map((statement) => JSON.stringify(statement.Resource)),
        action,
      ).toEqual([scheduleArn]);
    }
    // Its schedules invoke the dispatcher under the name the dispatcher is deployed with.
    expect(JSON.stringify(environmentOf(template, runner)[AWS_COMPUTE_ENV.pausedRunDispatcherArn])).toContain(
      `:function:${functions()[idOf(service.sources.pausedRunDispatcher.lambdaFunction)]!.Properties.FunctionName}"`,
    );
    expect(loadAwsComputeConfig(deployedEnvironmentOf(template, runner)).pausedRuns?.target).toBeDefined();
    for (const route of routes.filter((candidate) => candidate.access.pausedRuns)) {
      const id = routeFunctionId(route.name);
      expect(
        statementsWith(statementsOf(template, id), "scheduler:DeleteSchedule").map((statement) =>
          JSON.stringify(statement.Resource),
        ),
        route.name,
      ).toEqual([scheduleArn]);
      expect(loadAwsComputeConfig(deployedEnvironmentOf(template, id)).pausedRuns?.scheduleGroup, route.name).toBe(
        "https://resolved-at-deploy.example",
      );
    }
    expect(
      routes
        .filter((route) => route.access.pausedRuns)
        .map((route) => route.name)
        .sort(),
    ).toEqual(["create-workflow", "delete-workflow"]);
    // The endpoint function only reads and takes pauses: the delayed emits' rights, nothing more.
    const endpoint = idOf(service.sources.httpInterface.lambdaFunction);
    expect(actionsOf(template, endpoint)).not.toContain("scheduler:UpdateSchedule");
  });

  it("lets routes create, update and delete only sluice-<stage>-dc_* and -p_* functions, with the source role and the layer", () => {
    const scheduleArn = schedulesArn();
    const passSourceRole = {
      Resource: { "Fn::GetAtt": [idOf(service.sources.sourceRole), "Arn"] },
      Condition: { StringEquals: { "iam:PassedToService": "lambda.amazonaws.com" } },
    };
    const passSchedulerRole = {
      Resource: { "Fn::GetAtt": [idOf(service.sources.schedulerRole), "Arn"] },
      Condition: { StringEquals: { "iam:PassedToService": "scheduler.amazonaws.com" } },
    };
    const describer = JSON.stringify(idOf(service.sources.describer));
    const finisher = JSON.stringify(idOf(service.sources.deployFinisher.lambdaFunction));
    // What each level may do, on which resources (the exact actions: function-rights.test.ts).
    const expected: Record<ComputeAccess, { functions: unknown[]; creates: boolean; schedules: unknown[] }> = {
      describe: { functions: [], creates: false, schedules: [] },
      probe: { functions: [functionsArn("dc")], creates: true, schedules: [] },
      run: { functions: [[functionsArn("dc"), functionsArn("p_0000000000")]], creates: true, schedules: [] },
      remove: { functions: [COMPONENT_FUNCTIONS_ARNS], creates: false, schedules: [scheduleArn] },
      deploy: { functions: [COMPONENT_FUNCTIONS_ARNS], creates: true, schedules: [scheduleArn] },
    };
    for (const route of computeRoutes()) {
      const level = route.access.compute!;
      const { functions, creates, schedules } = expected[level];
      const statements = statementsOf(template, routeFunctionId(route.name));
      const on = (action: string) => statementsWith(statements, action).map((statement) => statement.Resource);
      const what = `${route.name} (${level})`;
      expect(on("lambda:GetFunction"), what).toEqual(functions);
      for (const action of ["lambda:CreateFunction", "lambda:UpdateFunctionCode", "lambda:TagResource"]) {
        expect(on(action), `${what} ${action}`).toEqual(creates ? functions : []);
      }
      expect(on("lambda:DeleteFunction"), what).toEqual(level === "remove" || level === "deploy" ? functions : []);
      expect(on("lambda:GetLayerVersion"), what).toEqual(creates ? [{ Ref: layerId() }] : []);
      expect(
        statementsWith(statements, "iam:PassRole").map(({ Resource, Condition }) => ({ Resource, Condition })),
        what,
      ).toEqual([...(creates ? [passSourceRole] : []), ...(level === "deploy" ? [passSchedulerRole] : [])]);
      expect(on("scheduler:DeleteSchedule"), what).toEqual(schedules);
      for (const action of ["scheduler:CreateSchedule", "scheduler:UpdateSchedule"]) {
        expect(on(action), `${what} ${action}`).toEqual(level === "deploy" ? schedules : []);
      }
      // Invoke: the describer (all but remove), the deploy finisher (deploy, remove) and the functions
      // above; never the source runner.
      const invokable = on("lambda:InvokeFunction").map((resource) => JSON.stringify(resource));
      expect(
        invokable.filter((resource) => resource.includes(describer)),
        what,
      ).toHaveLength(level === "remove" ? 0 : 1);
      expect(
        invokable.filter((resource) => resource.includes(finisher)),
        what,
      ).toHaveLength(level === "deploy" || level === "remove" ? 1 : 0);
      expect(
        invokable.filter((resource) => !resource.includes(describer) && !resource.includes(finisher)),
        what,
      ).toEqual(functions.map((resource) => JSON.stringify(resource)));
    }
  });

  it("gives routes that neither deploy, seal nor start purges no Lambda, IAM, Scheduler or KMS action", () => {
    for (const route of routes.filter((r) => !r.access.compute && !r.access.secrets && !r.access.eventPurges)) {
      expect(
        actionsOf(template, routeFunctionId(route.name)).filter((action) =>
          /^(lambda|iam|scheduler|kms):/.test(action),
        ),
        route.name,
      ).toEqual([]);
    }
  });

  it("lets routes that seal generate data keys and decrypt, and routes that open decrypt, with the stateful stack's key only", () => {
    const imported = importOf(statefulTemplate, { "Fn::GetAtt": ["SecretsKey", "Arn"] });
    for (const route of routes.filter((r) => r.access.secrets)) {
      const kms = statementsOf(template, routeFunctionId(route.name)).filter((s) =>
        JSON.stringify(s.Action).includes("kms:"),
      );
      expect(
        kms.map(({ Action, Resource }) => ({ Action, Resource })),
        route.name,
      ).toEqual([
        {
          Action: route.access.secrets === "seal" ? ["kms:GenerateDataKey", "kms:Decrypt"] : "kms:Decrypt",
          Resource: imported,
        },
      ]);
      expect(environmentOf(template, routeFunctionId(route.name))[AWS_COMPUTE_ENV.secretsKeyArn]).toEqual(imported);
    }
  });

  it("lets source functions' role write to the sources' log group and do nothing else", () => {
    const roleId = idOf(service.sources.sourceRole);
    const role = template.findResources("AWS::IAM::Role")[roleId] as Resource;
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      { Action: "sts:AssumeRole", Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" } },
    ]);
    expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    expect(statementsOfRole(template, roleId)).toEqual([
      {
        Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
        Effect: "Allow",
        Resource: { "Fn::GetAtt": [idOf(service.sources.sourceLogGroup), "Arn"] },
      },
    ]);
  });

  it("runs the describer with a logging-only role and no environment", () => {
    const id = idOf(service.sources.describer);
    const fn = functions()[id]!;
    expect(fn.Properties).toMatchObject({ Handler: "index.handler", Runtime: "nodejs22.x", Architectures: ["arm64"] });
    expect(fn.Properties.Environment).toBeUndefined();
    const role = template.findResources("AWS::IAM::Role")[roleIdOf(template, id)] as Resource;
    expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    expect(actionsOf(template, id).sort()).toEqual(["logs:CreateLogStream", "logs:PutLogEvents"]);
  });

  it("lets EventBridge Scheduler of this account assume the scheduler role, which may invoke the timer invoker, the delayed emit deliverer and the paused-run dispatcher only", () => {
    const roleId = idOf(service.sources.schedulerRole);
    const role = template.findResources("AWS::IAM::Role")[roleId] as Resource;
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      {
        Action: "sts:AssumeRole",
        Effect: "Allow",
        Principal: { Service: "scheduler.amazonaws.com" },
        Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
      },
    ]);
    const invokable = [
      service.sources.timerInvoker,
      service.sources.delayedEmitDeliverer,
      service.sources.pausedRunDispatcher,
    ].map((fn) => idOf(fn.lambdaFunction));
    expect(statementsOfRole(template, roleId)).toEqual(
      invokable.map((id) => ({
        Action: "lambda:InvokeFunction",
        Effect: "Allow",
        Resource: [{ "Fn::GetAtt": [id, "Arn"] }, { "Fn::Join": ["", [{ "Fn::GetAtt": [id, "Arn"] }, ":*"]] }],
      })),
    );
    template.hasResourceProperties("AWS::Scheduler::ScheduleGroup", { Name: "sluice-dev" });
  });

  it("runs the delayed emit deliverer with the table and the bus, and no component, schedule or key", () => {
    const id = idOf(service.sources.delayedEmitDeliverer.lambdaFunction);
    const environment = environmentOf(template, id);
    expect(Object.keys(environment).sort()).toEqual([ENV.resourcesTable, AWS_COMPUTE_ENV.eventBusName].sort());
    const actions = actionsOf(template, id);
    expect(actions).toEqual(
      expect.arrayContaining(["dynamodb:GetItem", "dynamodb:BatchWriteItem", "events:PutEvents"]),
    );
    expect(actions.filter((action) => /^(lambda|scheduler|iam|kms):/.test(action))).toEqual([]);
    const config = loadAwsComputeConfig(deployedEnvironmentOf(template, id));
    expect(config.delayedEmits).toBeUndefined();
  });

  it("lets the functions that apply runs (and deploy routes) schedule delayed emits in the group, and delete-source-events cancel them", () => {
    const scheduleArn = JSON.stringify(schedulesArn());
    const appliers = [service.sources.httpInterface, service.sources.sourceRunner, service.sources.timerInvoker].map(
      (fn) => idOf(fn.lambdaFunction),
    );
    for (const id of [...appliers, ...routesAt("deploy").map((route) => routeFunctionId(route.name))]) {
      const statements = statementsOf(template, id);
      for (const action of ["scheduler:CreateSchedule", "scheduler:DeleteSchedule"]) {
        expect(
          statementsWith(statements, action).map((statement) => JSON.stringify(statement.Resource)),
          id,
        ).toEqual([scheduleArn]);
      }
      const config = loadAwsComputeConfig(deployedEnvironmentOf(template, id));
      expect(config.delayedEmits?.target, id).toBeDefined();
    }
    const canceller = routeFunctionId("delete-source-events");
    const statements = statementsOf(template, canceller);
    expect(statementsWith(statements, "scheduler:DeleteSchedule").map((s) => JSON.stringify(s.Resource))).toEqual([
      scheduleArn,
    ]);
    expect(actionsOf(template, canceller).filter((action) => /^(scheduler|iam):/.test(action))).toEqual([
      "scheduler:DeleteSchedule",
    ]);
    expect(loadAwsComputeConfig(deployedEnvironmentOf(template, canceller)).delayedEmits).toEqual({
      scheduleGroup: "https://resolved-at-deploy.example",
      target: undefined,
    });
  });

  it("configures the internal functions with the table, stage, public URL, runner, key and time limit", () => {
    const common = {
      [ENV.resourcesTable]: Match.objectLike({ "Fn::ImportValue": Match.anyValue() }),
      [AWS_COMPUTE_ENV.stage]: "dev",
      [ENV.publicUrl]: { "Fn::GetAtt": [idOf(service.httpApi), "ApiEndpoint"] },
      [ENV.invocationTimeoutMs]: "30000",
      [AWS_COMPUTE_ENV.secretsKeyArn]: Match.objectLike({ "Fn::ImportValue": Match.anyValue() }),
      // They store what sources emit, and publish it for subscribers (event-fanout.test.ts).
      [AWS_COMPUTE_ENV.eventBusName]: { Ref: idOf(service.eventFanout.bus) },
      // They queue the deliveries of workflow runs' sends (event-fanout.test.ts).
      [AWS_COMPUTE_ENV.deliveryQueueUrl]: { Ref: idOf(service.eventFanout.deliveryQueue) },
    };
    const runner = {
      [AWS_COMPUTE_ENV.sourceRunnerFunction]: { Ref: idOf(service.sources.sourceRunner.lambdaFunction) },
    };
    // They schedule the delayed emits of the runs they apply (and cancel them).
    Object.assign(common, {
      [AWS_COMPUTE_ENV.scheduleGroup]: { Ref: idOf(service.sources.scheduleGroup) },
      [AWS_COMPUTE_ENV.schedulerRoleArn]: { "Fn::GetAtt": [idOf(service.sources.schedulerRole), "Arn"] },
      [AWS_COMPUTE_ENV.delayedEmitDelivererArn]: {
        "Fn::GetAtt": [idOf(service.sources.delayedEmitDeliverer.lambdaFunction), "Arn"],
      },
    });
    // The source runner pauses workflow runs: its schedules invoke the dispatcher, named by its fixed name.
    const pauser = {
      [AWS_COMPUTE_ENV.pausedRunDispatcherArn]: {
        "Fn::Join": [
          "",
          [
            "arn:",
            { Ref: "AWS::Partition" },
            ":lambda:",
            { Ref: "AWS::Region" },
            ":",
            { Ref: "AWS::AccountId" },
            ":function:sluice-dev-paused-run-dispatcher",
          ],
        ],
      },
    };
    const expectations = [
      [service.sources.httpInterface, { ...common, ...runner }, 30],
      [service.sources.timerInvoker, { ...common, ...runner }, 120],
      [service.sources.sourceRunner, { ...common, ...pauser }, 60],
    ] as const;
    for (const [fn, variables, timeout] of expectations) {
      template.hasResourceProperties("AWS::Lambda::Function", {
        Description: Match.stringLikeRegexp(fn.entry),
        Timeout: timeout,
        Environment: { Variables: Match.exact(variables) },
      });
      // Run, not deploy: no setting of the deploying routes.
      const environment = environmentOf(template, idOf(fn.lambdaFunction));
      for (const name of [...SOURCE_FUNCTIONS_ENV, ...SCHEDULES_ENV, AWS_COMPUTE_ENV.describerFunction]) {
        // The group and the scheduler role are also set alone, for delayed emits.
        if (name === AWS_COMPUTE_ENV.scheduleGroup || name === AWS_COMPUTE_ENV.schedulerRoleArn) continue;
        expect(environment[name], `${fn.entry} ${name}`).toBeUndefined();
      }
      expect(loadAwsComputeConfig(deployedEnvironmentOf(template, idOf(fn.lambdaFunction))).schedules).toBeUndefined();
      expect(actionsOf(template, idOf(fn.lambdaFunction))).not.toContain("lambda:CreateFunction");
      // They run sources and workflows: invoke their functions (and wait for one being updated).
      const statements = statementsOf(template, idOf(fn.lambdaFunction));
      for (const action of ["lambda:InvokeFunction", "lambda:GetFunction"]) {
        expect(statementsWith(statements, action).map((statement) => statement.Resource)).toContainEqual(
          COMPONENT_FUNCTIONS_ARNS,
        );
      }
      // They open secret props, and seal the grant of a run with data stores (grantDataStores).
      expect(actionsOf(template, idOf(fn.lambdaFunction))).toEqual(
        expect.arrayContaining(["kms:Decrypt", "kms:GenerateDataKey"]),
      );
    }
  });

  it("retries failed queued runs twice, then keeps them in the failed-runs queue; failed timer ticks never", () => {
    const failedRunsArn = { "Fn::GetAtt": [idOf(service.sources.failedRunsQueue), "Arn"] };
    const configs = template.findResources("AWS::Lambda::EventInvokeConfig", {
      Properties: { FunctionName: { Ref: idOf(service.sources.sourceRunner.lambdaFunction) } },
    });
    expect(Object.values(configs).map((config) => (config as Resource).Properties)).toEqual([
      {
        FunctionName: { Ref: idOf(service.sources.sourceRunner.lambdaFunction) },
        Qualifier: "$LATEST",
        MaximumRetryAttempts: 2,
        DestinationConfig: { OnFailure: { Destination: failedRunsArn } },
      },
    ]);
    template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: idOf(service.sources.timerInvoker.lambdaFunction) },
      MaximumRetryAttempts: 0,
      DestinationConfig: Match.absent(),
    });
  });

  it("keeps failed runs 14 days in an encrypted, TLS-only queue named after the stage", () => {
    const queueId = idOf(service.sources.failedRunsQueue);
    const queue = template.findResources("AWS::SQS::Queue")[queueId] as Resource;
    expect(failedRunsQueueNameFor("dev")).toBe("sluice-dev-failed-runs");
    expect(queue.Properties).toEqual({
      QueueName: "sluice-dev-failed-runs",
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 86_400,
      // A run job may be as large as Lambda's async payload limit, 1 MiB.
      MaximumMessageSize: 1_048_576,
    });
    // Nothing consumes it: a failed run is replayed by hand, not retried forever.
    expect(
      template.findResources("AWS::Lambda::EventSourceMapping", {
        Properties: { EventSourceArn: { "Fn::GetAtt": [queueId, "Arn"] } },
      }),
    ).toEqual({});
    template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [{ Ref: queueId }],
      PolicyDocument: {
        Statement: [
          Match.objectLike({
            Action: "sqs:*",
            Effect: "Deny",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
        ],
      },
    });
  });

  it("lets the source runner, and no other function, send to the failed-runs queue", () => {
    const queueArn = { "Fn::GetAtt": [idOf(service.sources.failedRunsQueue), "Arn"] };
    const runnerId = idOf(service.sources.sourceRunner.lambdaFunction);
    const sends = statementsWith(statementsOf(template, runnerId), "sqs:SendMessage").filter(
      (statement) => JSON.stringify(statement.Resource) === JSON.stringify(queueArn),
    );
    expect(sends).toHaveLength(1);
    for (const id of Object.keys(functions()).filter((id) => id !== runnerId)) {
      expect(JSON.stringify(statementsOf(template, id)), id).not.toContain(idOf(service.sources.failedRunsQueue));
    }
  });

  it("gives each compute route the settings of its level, and no npm registry unless asked", () => {
    for (const route of computeRoutes()) {
      const level = route.access.compute!;
      const config = loadAwsComputeConfig(deployedEnvironmentOf(template, routeFunctionId(route.name)));
      const what = `${route.name} (${level})`;
      expect(config.describerFunction !== undefined, what).toBe(level !== "remove");
      expect(config.functions !== undefined, what).toBe(level === "probe" || level === "run" || level === "deploy");
      expect(config.schedules !== undefined, what).toBe(level === "remove" || level === "deploy");
      // Hooks and probes run in the request: none queues runs.
      expect(config.sourceRunnerFunction, what).toBeUndefined();
      expect(config.stage, what).toBe(level === "describe" ? "default" : "dev");
      expect(config.npmRegistry).toBeUndefined();
    }
  });

  it("keeps installed npm trees in a private, encrypted, SSL-only bucket whose trees expire, and leaves with the stack", () => {
    const bucketId = idOf(service.sources.npmTrees);
    const bucket = template.toJSON().Resources[bucketId];
    expect(bucket.Type).toBe("AWS::S3::Bucket");
    expect(bucket.DeletionPolicy).toBe("Delete");
    expect(bucket.Properties).toEqual({
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } }],
      },
      PublicAccessBlockConfiguration: {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      },
      OwnershipControls: { Rules: [{ ObjectOwnership: "BucketOwnerEnforced" }] },
      LifecycleConfiguration: {
        Rules: [
          {
            Id: "ExpireNpmTrees",
            Prefix: NPM_TREES_PREFIX,
            ExpirationInDays: NPM_TREES_EXPIRY.toDays(),
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
            Status: "Enabled",
          },
        ],
      },
    });
    // enforceSSL: every request over plain HTTP is denied.
    const policies = Object.values(
      template.findResources("AWS::S3::BucketPolicy", { Properties: { Bucket: { Ref: bucketId } } }),
    ) as Resource[];
    expect(policies).toHaveLength(1);
    expect(policies[0]!.Properties.PolicyDocument.Statement).toEqual([
      expect.objectContaining({
        Effect: "Deny",
        Action: "s3:*",
        Principal: { AWS: "*" },
        Condition: { Bool: { "aws:SecureTransport": "false" } },
      }),
    ]);
    // No custom resource (autoDeleteObjects would add one, with a function that may delete every object).
    expect(Object.keys(template.findResources("Custom::S3AutoDeleteObjects"))).toEqual([]);
  });

  it("lets only the functions that install packages read and store trees, on npm-trees/* of that bucket, and names it to them", () => {
    const treesArn = {
      "Fn::Join": ["", [{ "Fn::GetAtt": [idOf(service.sources.npmTrees), "Arn"] }, `/${NPM_TREES_PREFIX}*`]],
    };
    const installing = [
      ...routesAt("deploy").map((route) => routeFunctionId(route.name)),
      idOf(service.sources.deployFinisher.lambdaFunction),
    ];
    expect(installing).toHaveLength(5);
    for (const id of Object.keys(functions())) {
      const s3 = statementsOf(template, id).filter((statement) => JSON.stringify(statement.Action).includes("s3:"));
      const config = loadAwsConfig(deployedEnvironmentOf(template, id), { resources: false });
      if (installing.includes(id)) {
        expect(
          s3.map(({ Effect, Action, Resource }) => ({ Effect, Action, Resource })),
          id,
        ).toEqual([{ Effect: "Allow", Action: ["s3:GetObject", "s3:PutObject"], Resource: treesArn }]);
        expect(environmentOf(template, id)[ENV.npmTreesBucket], id).toEqual({ Ref: idOf(service.sources.npmTrees) });
        expect(environmentOf(template, id)[ENV.s3ExpectedOwner], id).toEqual({ Ref: "AWS::AccountId" });
        expect(config.npmTreesBucket, id).toBeDefined();
      } else {
        expect(JSON.stringify(statementsOf(template, id)), id).not.toContain(idOf(service.sources.npmTrees));
        expect(config.npmTreesBucket, id).toBeUndefined();
      }
    }
  });
});

describe("ServiceStack with an npm registry (-c npmRegistry)", () => {
  it("tells the routes that bundle components and the deploy finisher, and no other function, where to install npm packages", () => {
    const registry = "https://npm.example.com/mirror/";
    const { service, template } = synthService({ npmRegistry: registry });
    const deploying = routes
      .filter((route) => route.access.compute && route.access.compute !== "remove")
      .map((route) => idOf(service.routeFunctions.get(route.name)!.function.lambdaFunction));
    deploying.push(idOf(service.sources.deployFinisher.lambdaFunction));
    expect(deploying.length).toBeGreaterThan(0);
    const told = Object.keys(functionsOf(template)).filter((id) => environmentOf(template, id)[ENV.npmRegistry]);
    expect(told.sort()).toEqual(deploying.sort());
    for (const id of told) {
      expect(loadAwsComputeConfig(deployedEnvironmentOf(template, id)).npmRegistry).toBe(registry);
    }
  });

  it("fails at synth when the registry is not an http or https URL", () => {
    expect(() => synthService({ npmRegistry: "npm.example.com" })).toThrow(
      /npmRegistry "npm.example.com" is not an http/,
    );
    expect(() => synthService({ npmRegistry: "file:///tmp/npm" })).toThrow(/is not an http or https URL/);
  });
});

describe("ServiceStack with a log level (-c logLevel)", () => {
  it("sets SLUICE_LOG_LEVEL on every function of the stack, and on none without it", () => {
    const { template } = synthService({ logLevel: "warn" });
    const ids = Object.keys(functionsOf(template));
    expect(ids.length).toBeGreaterThan(20);
    for (const id of ids) expect(environmentOf(template, id)[ENV.logLevel]).toBe("warn");
    const plain = synthService().template;
    for (const id of Object.keys(functionsOf(plain))) expect(environmentOf(plain, id)[ENV.logLevel]).toBeUndefined();
  });

  it("fails at synth on a level that does not exist", () => {
    expect(() => synthService({ logLevel: "loud" as LogLevel })).toThrow(/Invalid logLevel "loud"/);
  });
});

describe("SluiceFunction with packages copied into its bundle", () => {
  it("fails synth with an error naming a package that is not installed", () => {
    const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
    const stack = new Stack(app, "Test");
    new SluiceFunction(stack, "Fn", {
      entry: "functions/http/get-openapi.ts",
      copyNodeModules: ["sluice-package-that-is-not-installed"],
    });
    Annotations.fromStack(stack).hasError(
      "/Test/Fn",
      Match.stringLikeRegexp("sluice-package-that-is-not-installed.*npm install"),
    );
  });
});

/** A copy of the fixture tree with what a registry checkout holds beside the code. */
const checkout = mkdtempSync(join(tmpdir(), "sluice-registry-checkout-"));
const appsDir = mkdtempSync(join(tmpdir(), "sluice-apps-file-"));
const goodApps = join(appsDir, "apps.json");
writeFileSync(
  goodApps,
  JSON.stringify({ apps: [{ name_slug: "acme", name: "Acme", auth_type: "keys", fields: ["k"] }] }),
);
let withOperatorFiles: ReturnType<typeof synthService> | undefined;
/** One synth (seconds of CPU) for both: `-c registryDir` and `-c appsFile`. */
const synthWithOperatorFiles = () =>
  (withOperatorFiles ??= synthService({ registryDir: checkout, appsFile: goodApps }));

describe("ServiceStack with an apps file (-c appsFile)", () => {
  const bad = join(appsDir, "bad.json");
  writeFileSync(bad, JSON.stringify({ apps: [{ name_slug: "Acme Corp", name: "Acme", auth_type: "keys" }] }));

  it("bundles the shipped apps and the operator's file into the routes that read the table, and no other function", () => {
    const { service } = synthWithOperatorFiles();
    const accounts = service.routeFunctions.get("create-account")?.function.bundledTrees ?? [];
    const apps = accounts.find((tree) => tree.to === APPS_ASSET);
    expect(readdirSync(apps?.from ?? "").sort()).toEqual([APPS_FILE_NAME, OPERATOR_APPS_FILE]);
    expect(readFileSync(join(apps?.from ?? "", OPERATOR_APPS_FILE), "utf8")).toContain('"acme"');
    expect(readFileSync(join(apps?.from ?? "", APPS_FILE_NAME), "utf8")).toContain('"postgresql"');
    expect(service.routeFunctions.get("get-openapi")?.function.bundledTrees).toEqual([]);
    // Where runs read an account's credentials; not the describer (untrusted code), nor others.
    const { httpInterface, sourceRunner, timerInvoker, deploySweeper } = service.sources;
    for (const fn of [httpInterface, sourceRunner, timerInvoker]) expect(fn.bundledTrees).toEqual([apps]);
    expect(deploySweeper.bundledTrees).toEqual([]);
  });

  it("fails the synth naming the file and the field of a bad apps file, or one that cannot be read", () => {
    expect(() => synthService({ appsFile: bad })).toThrow(
      /appsFile ".*bad\.json": apps\[0\]\.name_slug: must be lower-case/,
    );
    expect(() => synthService({ appsFile: join(appsDir, "missing.json") })).toThrow(
      /appsFile ".*missing\.json" cannot be read: ENOENT/,
    );
  });
});

describe("ServiceStack with a registry directory (-c registryDir)", () => {
  cpSync(REGISTRY_TREE, checkout, { recursive: true });
  const app = join(checkout, "components", "webhooks");
  writeFileSync(join(app, "package-lock.json"), "{}");
  writeFileSync(join(app, "logo.png"), "PNG");
  mkdirSync(join(app, "node_modules", "dep"), { recursive: true });
  writeFileSync(join(app, "node_modules", "dep", "index.js"), "module.exports = 1;");
  mkdirSync(join(checkout, ".git"));
  writeFileSync(join(checkout, ".git", "config"), "[core]");
  symlinkSync("/etc/hostname", join(app, "outside.mjs"));

  it("gives the routes that deploy, and no other function, a filtered copy of the tree as registry-dir/", () => {
    const { service } = synthWithOperatorFiles();
    const tree = service.sources.bundledRegistryDir;
    expect(tree?.to).toBe(REGISTRY_DIR_ASSET);
    const deploying = new Set(routes.filter((route) => route.access.compute).map((route) => route.name));
    expect(deploying.size).toBeGreaterThan(0);
    // With esbuild's binary for Lambda when it was fetched (lambda-esbuild.ts).
    const esbuild = existsSync(join(LAMBDA_PACKAGES_DIR, LAMBDA_ESBUILD_PACKAGE))
      ? [join("node_modules", LAMBDA_ESBUILD_PACKAGE)]
      : [];
    const readsTable = new Set(routes.filter((route) => route.access.resources).map((route) => route.name));
    for (const [name, route] of service.routeFunctions) {
      const carried = route.function.bundledTrees.map((bundled) => bundled.to);
      expect(carried, name).toEqual([
        ...(deploying.has(name) ? ["registry", REGISTRY_DIR_ASSET, ...esbuild] : []),
        ...(readsTable.has(name) ? [APPS_ASSET] : []),
      ]);
    }
    expect(service.sources.deployFinisher.bundledTrees.map((bundled) => bundled.to)).toEqual([
      "registry",
      REGISTRY_DIR_ASSET,
      ...esbuild,
    ]);
    const copied = readdirSync(tree!.from, { recursive: true, encoding: "utf8" });
    expect(copied).toContain(join("components", "webhooks", "sources", "new-request", "new-request.mjs"));
    expect(copied).toContain(join("components", "webhooks", "webhooks.app.mjs"));
    for (const left of ["package-lock.json", "logo.png", "node_modules", "outside.mjs", ".git", "README.md"])
      expect(
        copied.filter((path) => path.split(sep).includes(left)),
        left,
      ).toEqual([]);
  });

  it("fails the synth when the directory is no folder", () => {
    expect(() => synthService({ registryDir: join(checkout, "no-such-folder") })).toThrow(
      /registryDir ".*no-such-folder" is not a folder/,
    );
  });

  it("bundles the tree into the function's asset, where the AWS composition serves it by key before the shipped registry", async () => {
    // One small function bundled for real, as a deploying route is (bundling.test.ts bundles them all).
    const bundling = new App({ context: { "aws:cdk:bundling-stacks": ["**"] } });
    const stack = new Stack(bundling, "RegistryDirBundle");
    const tree = { from: stageRegistryDir(checkout).dir, to: REGISTRY_DIR_ASSET };
    const fn = new SluiceFunction(stack, "Fn", {
      entry: "functions/http/route-not-found.ts",
      copyFolders: ["registry"],
      copyTrees: [tree],
    });
    const cfn = fn.lambdaFunction.node.defaultChild as CfnFunction;
    const code =
      Template.fromStack(stack).findResources("AWS::Lambda::Function")[stack.getLogicalId(cfn)]?.Properties.Code;
    expect(code?.S3Key).toMatch(/^[0-9a-f]{64}\.zip$/);
    const dir = join(bundling.outdir, `asset.${code.S3Key.replace(/\.zip$/, "")}`);
    const served = buildAwsDeps([], { LAMBDA_TASK_ROOT: dir }).registry;
    const source = unpackComponentFiles((await served.readCode("webhooks-new-request")) ?? "");
    expect(source?.entry).toBe("webhooks/sources/new-request/new-request.mjs");
    expect(Object.keys(source?.files ?? {})).toContain("webhooks/webhooks.app.mjs");
    expect(await served.readCode("http-new-requests")).toContain('key: "http-new-requests"');
    expect(existsSync(join(dir, REGISTRY_DIR_ASSET, "components", "webhooks", "logo.png"))).toBe(false);
  });
});
