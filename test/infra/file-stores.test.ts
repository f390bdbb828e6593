import type { Template } from "aws-cdk-lib/assertions";
import { beforeAll, describe, expect, it } from "vitest";
import { ENV, loadAwsConfig } from "#config/env";
import type { ServiceStack } from "../../lib/service-stack.ts";
import { FILE_STORES_BUCKET_ID } from "../../lib/stateful-stack.ts";
import {
  deployedEnvironmentOf,
  environmentOf,
  functionsOf,
  idOf,
  importOf,
  statementsOf,
  synthService,
} from "./service-template.ts";

/** Projects' File Stores on AWS (docs/file-stores.md): the stateful stack's bucket, and who may use it. */
describe("File Stores on AWS", () => {
  let service: ServiceStack;
  let template: Template;
  let statefulTemplate: Template;

  beforeAll(() => {
    ({ service, template, statefulTemplate } = synthService({ stage: "dev" }));
  });

  it("keeps files in a private, encrypted bucket of the stateful stack, retained with it", () => {
    const bucket = statefulTemplate.findResources("AWS::S3::Bucket")[FILE_STORES_BUCKET_ID];
    expect(bucket).toBeDefined();
    expect(bucket?.DeletionPolicy).toBe("Retain");
    expect(bucket?.Properties.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    expect(bucket?.Properties.BucketEncryption.ServerSideEncryptionConfiguration).toEqual([
      { ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } },
    ]);
    // Plain HTTP is refused by the bucket's policy.
    const policies = Object.values(statefulTemplate.findResources("AWS::S3::BucketPolicy"));
    expect(JSON.stringify(policies)).toContain('"aws:SecureTransport":"false"');
  });

  it("gives the function that serves runs' calls alone the bucket: its objects, its listing, its name", () => {
    const serving = idOf(service.routeFunctions.get("serve-data-store-call")!.function.lambdaFunction);
    const bucketArn = importOf(statefulTemplate, { "Fn::GetAtt": [FILE_STORES_BUCKET_ID, "Arn"] });
    const bucketName = importOf(statefulTemplate, { Ref: FILE_STORES_BUCKET_ID });
    for (const id of Object.keys(functionsOf(template))) {
      const touches = JSON.stringify(statementsOf(template, id)).includes(JSON.stringify(bucketArn));
      if (id === serving) {
        const s3 = statementsOf(template, id).filter((statement) => JSON.stringify(statement.Action).includes("s3:"));
        expect(s3.map(({ Action, Resource }) => ({ Action, Resource }))).toEqual([
          {
            Action: ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            Resource: { "Fn::Join": ["", [bucketArn, "/*"]] },
          },
          { Action: "s3:ListBucket", Resource: bucketArn },
        ]);
        expect(environmentOf(template, id)[ENV.fileStoreBucket]).toEqual(bucketName);
        expect(loadAwsConfig(deployedEnvironmentOf(template, id)).fileStoreBucket).toBeDefined();
      } else {
        expect(touches, id).toBe(false);
        expect(environmentOf(template, id)[ENV.fileStoreBucket], id).toBeUndefined();
      }
    }
  });
});
