import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { mockClient } from "aws-sdk-client-mock";
import { expect, it } from "vitest";
import { buildAwsDeps } from "#adapters/aws/composition";
import { part as objects } from "#adapters/aws/parts/objects";
import { ENV } from "#config/env";

// The sink of `$.send.s3` on AWS is S3, with the buckets the stack lists (`-c s3Buckets`).
it("gives the AWS composition an S3 sink allowing the buckets of SLUICE_S3_BUCKETS", async () => {
  const s3Mock = mockClient(S3Client);
  s3Mock.on(PutObjectCommand).resolves({});
  try {
    const deps = buildAwsDeps([objects], { [ENV.s3Buckets]: "sluice-exports" });
    expect(deps.objects.allowsBucket("sluice-exports")).toBe(true);
    expect(deps.objects.allowsBucket("elsewhere")).toBe(false);
    expect(await deps.objects.putObject("sluice-exports", "a.json", "{}", "application/json")).toEqual({
      stored: true,
    });
    expect(s3Mock.commandCalls(PutObjectCommand)[0]?.args[0].input).toMatchObject({ Bucket: "sluice-exports" });
  } finally {
    s3Mock.restore();
  }
});
