/** The service stack synthesised without bundling, and readers of its template, for the infra tests. */
import { App, type CfnElement, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import { expect } from "vitest";
import type { RouteSpec } from "../../lib/constructs/api-route-function.ts";
import { ServiceStack } from "../../lib/service-stack.ts";
import { StatefulStack } from "../../lib/stateful-stack.ts";

// Skips the CloudFormation validation plugin, which halves synth time; it checks nothing of ours.
process.env.CDK_VALIDATION = "false";

export type Resource = { Properties: Record<string, any>; DeletionPolicy?: string };
export type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown; Effect: string };

/** Both stacks with bundling skipped (bundling.test.ts bundles for real). */
export function synthService(options: { stage?: string; routes?: readonly RouteSpec[] } = {}) {
  const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
  const stateful = new StatefulStack(app, "SluiceStateful", { stage: options.stage });
  const service = new ServiceStack(app, "SluiceService", {
    resourcesTable: stateful.resourcesTable,
    secretsKey: stateful.secretsKey,
    stage: options.stage,
    routes: options.routes,
  });
  return { service, template: Template.fromStack(service), statefulTemplate: Template.fromStack(stateful) };
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

/** Every IAM action granted to a function's execution role. */
export const actionsOf = (template: Template, functionId: string): string[] =>
  statementsOf(template, functionId).flatMap((statement) => [statement.Action].flat());

export const environmentOf = (template: Template, functionId: string): Record<string, unknown> =>
  functionsOf(template)[functionId]?.Properties.Environment?.Variables ?? {};
