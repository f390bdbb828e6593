import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { beforeAll, describe, expect, it } from "vitest";
import { RESOURCES_TABLE } from "#config/shared-names";
import { SECRETS_KEY_ID, StatefulStack } from "../../lib/stateful-stack.ts";

// Skips the CloudFormation validation plugin, which halves synth time; it checks nothing of ours.
process.env.CDK_VALIDATION = "false";

const TABLE = "AWS::DynamoDB::GlobalTable";

function synth(props: ConstructorParameters<typeof StatefulStack>[2] = {}) {
  const app = new App({ context: { "aws:cdk:bundling-stacks": [] } });
  const stack = new StatefulStack(app, "SluiceStateful", props);
  return { stack, template: Template.fromStack(stack) };
}

describe("StatefulStack", () => {
  let template: Template;

  beforeAll(() => {
    ({ template } = synth());
  });

  it("declares exactly one table, keyed on the string attributes pk and sk", () => {
    template.resourceCountIs(TABLE, 1);
    template.hasResourceProperties(TABLE, {
      KeySchema: [
        { AttributeName: "pk", KeyType: "HASH" },
        { AttributeName: "sk", KeyType: "RANGE" },
      ],
      AttributeDefinitions: Match.arrayWith([
        { AttributeName: "pk", AttributeType: "S" },
        { AttributeName: "sk", AttributeType: "S" },
      ]),
    });
  });

  it("bills the table on demand", () => {
    template.hasResourceProperties(TABLE, { BillingMode: "PAY_PER_REQUEST" });
  });

  it("enables point-in-time recovery and deletion protection", () => {
    template.hasResourceProperties(TABLE, {
      Replicas: [
        Match.objectLike({
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          DeletionProtectionEnabled: true,
        }),
      ],
    });
  });

  it("retains the table when the stack is deleted or the table replaced", () => {
    template.hasResource(TABLE, { DeletionPolicy: "Retain", UpdateReplacePolicy: "Retain" });
  });

  it("gives the table the fixed logical id of the table design, so a refactor cannot replace it", () => {
    expect(Object.keys(template.findResources(TABLE))).toEqual([RESOURCES_TABLE.id]);
  });

  it("outputs the table name", () => {
    template.hasOutput("ResourcesTableName", { Value: { Ref: RESOURCES_TABLE.id } });
  });

  it("keeps a KMS key for secrets, rotated yearly and retained with the data", () => {
    template.resourceCountIs("AWS::KMS::Key", 1);
    template.hasResource("AWS::KMS::Key", {
      DeletionPolicy: "Retain",
      UpdateReplacePolicy: "Retain",
      Properties: Match.objectLike({ EnableKeyRotation: true }),
    });
    // A fixed logical id: a replaced key could open none of the sealed secrets.
    expect(Object.keys(template.findResources("AWS::KMS::Key"))).toEqual([SECRETS_KEY_ID]);
  });

  it("lets only the account's IAM policies grant use of the key, so the key policy names no function", () => {
    const key = Object.values(template.findResources("AWS::KMS::Key"))[0] as { Properties: { KeyPolicy: any } };
    expect(key.Properties.KeyPolicy.Statement).toEqual([
      {
        Action: "kms:*",
        Effect: "Allow",
        Principal: {
          AWS: { "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":iam::", { Ref: "AWS::AccountId" }, ":root"]] },
        },
        Resource: "*",
      },
    ]);
  });

  it("names the key by stage with an alias that leaves with the stack, so a redeploy can make it again", () => {
    template.hasResourceProperties("AWS::KMS::Alias", {
      AliasName: "alias/sluice/default/secrets",
      TargetKeyId: { "Fn::GetAtt": [SECRETS_KEY_ID, "Arn"] },
    });
    const alias = Object.values(template.findResources("AWS::KMS::Alias"))[0] as { DeletionPolicy?: string };
    expect(alias.DeletionPolicy).toBeUndefined();
    synth({ stage: "dev" }).template.hasResourceProperties("AWS::KMS::Alias", {
      AliasName: "alias/sluice/dev/secrets",
    });
  });

  it("still retains the table when a throwaway stage turns deletion protection off", () => {
    const { template: unprotected } = synth({ deletionProtection: false });
    unprotected.hasResource(TABLE, {
      DeletionPolicy: "Retain",
      Properties: { Replicas: [Match.objectLike({ DeletionProtectionEnabled: false })] },
    });
  });
});
