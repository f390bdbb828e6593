/** The service stack synthesised without bundling, and readers of its template, for the infra tests. */

import { App, type CfnElement, Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import type { IConstruct } from "constructs";
import { expect } from "vitest";
import { ENV } from "#config/env";
import type { LogLevel } from "#core/ports/logger";
import type { RouteSpec } from "../../lib/constructs/api-route-function.ts";
import { ServiceStack } from "../../lib/service-stack.ts";
import { StatefulStack } from "../../lib/stateful-stack.ts";

// Skips the CloudFormation validation plugin, which halves synth time; it checks nothing of ours.
process.env.CDK_VALIDATION = "false";

export type Resource = { Properties: Record<string, any>; DeletionPolicy?: string };
export type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown; Effect: string };

export const DYNAMODB_WRITES = [
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
  "dynamodb:DeleteItem",
  "dynamodb:BatchWriteItem",
];

/** Both stacks with bundling skipped (bundling.test.ts bundles for real). */
export function synthService(
  options: {
    stage?: string;
    routes?: readonly RouteSpec[];
    npmRegistry?: string;
    logLevel?: LogLevel;
    s3Buckets?: readonly string[];
    registryDir?: string;
    appsFile?: string;
    logRetention?: RetentionDays;
    maxStreams?: number | "unreserved";
    maxDeliveryConcurrency?: number;
  } = {},
) {
  const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
  const stateful = new StatefulStack(app, "SluiceStateful", { stage: options.stage });
  const service = new ServiceStack(app, "SluiceService", {
    resourcesTable: stateful.resourcesTable,
    secretsKey: stateful.secretsKey,
    fileStoreBucket: stateful.fileStoreBucket,
    stage: options.stage,
    routes: options.routes,
    npmRegistry: options.npmRegistry,
    logLevel: options.logLevel,
    s3Buckets: options.s3Buckets,
    registryDir: options.registryDir,
    appsFile: options.appsFile,
    logRetention: options.logRetention,
    maxStreams: options.maxStreams,
    maxDeliveryConcurrency: options.maxDeliveryConcurrency,
  });
  return { service, template: Template.fromStack(service), statefulTemplate: Template.fromStack(stateful) };
}

/** How the service stack refers to a value the stateful stack exports (the table's name or ARN, the key's ARN). */
export function importOf(statefulTemplate: Template, value: unknown): { "Fn::ImportValue": string } {
  const outputs = Object.values(statefulTemplate.findOutputs("*", { Value: value, Export: Match.anyValue() }));
  expect(outputs).toHaveLength(1);
  return { "Fn::ImportValue": outputs[0]!.Export.Name };
}

/** The logical id of an L2 construct's resource, or of an L1 resource itself. */
export const idOf = (construct: IConstruct): string =>
  Stack.of(construct).getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);

export const functionsOf = (template: Template) =>
  template.findResources("AWS::Lambda::Function") as Record<string, Resource>;

export function roleIdOf(template: Template, functionId: string): string {
  const fn = functionsOf(template)[functionId];
  expect(fn, `function ${functionId}`).toBeDefined();
  return fn!.Properties.Role["Fn::GetAtt"][0];
}

/** Every statement of the inline policies attached to a role. */
export const statementsOfRole = (template: Template, roleId: string): Statement[] =>
  (Object.values(template.findResources("AWS::IAM::Policy")) as Resource[])
    .filter((policy) => JSON.stringify(policy.Properties.Roles).includes(JSON.stringify({ Ref: roleId })))
    .flatMap((policy) => policy.Properties.PolicyDocument.Statement);

/** Every statement granted to a function's execution role. */
export const statementsOf = (template: Template, functionId: string) =>
  statementsOfRole(template, roleIdOf(template, functionId));

/** The statements that grant `action`. */
export const statementsWith = (statements: Statement[], action: string) =>
  statements.filter((statement) => [statement.Action].flat().includes(action));

/** Every IAM action granted to a function's execution role. */
export const actionsOf = (template: Template, functionId: string): string[] =>
  statementsOf(template, functionId).flatMap((statement) => [statement.Action].flat());

export const environmentOf = (template: Template, functionId: string): Record<string, unknown> =>
  functionsOf(template)[functionId]?.Properties.Environment?.Variables ?? {};

/**
 * A function's environment as it would read it once deployed, a placeholder URL standing in for
 * each value CloudFormation resolves at deploy (a name, an ARN, a URL).
 */
export const deployedEnvironmentOf = (template: Template, functionId: string): Record<string, string> =>
  Object.fromEntries(
    Object.entries(environmentOf(template, functionId)).map(([name, value]) => [
      name,
      typeof value === "string" ? value : (RESOLVED_AT_DEPLOY[name] ?? "https://resolved-at-deploy.example"),
    ]),
  );

/** Placeholders of the values that are neither a URL, an ARN nor a function's name. */
const RESOLVED_AT_DEPLOY: Record<string, string> = {
  [ENV.npmTreesBucket]: "sluice-npm-trees-resolved-at-deploy",
  [ENV.fileStoreBucket]: "sluice-file-stores-resolved-at-deploy",
  [ENV.s3ExpectedOwner]: "123456789012",
};
