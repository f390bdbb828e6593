import { PutObjectCommand, S3Client, S3ServiceException } from "@aws-sdk/client-s3";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { S3ObjectSink } from "#adapters/aws/s3-object-sink";

const s3Mock = mockClient(S3Client);

const sink = () =>
  new S3ObjectSink({
    s3: new S3Client({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    buckets: ["sluice-exports", "other.bucket", "Not_A_Bucket"],
  });

beforeEach(() => {
  s3Mock.reset();
});

describe("S3ObjectSink", () => {
  it("allows the listed buckets only, and never one that is not an S3 bucket name", () => {
    expect(sink().allowsBucket("sluice-exports")).toBe(true);
    expect(sink().allowsBucket("other.bucket")).toBe(true);
    expect(sink().allowsBucket("Not_A_Bucket")).toBe(false);
    expect(sink().allowsBucket("someone-elses-bucket")).toBe(false);
  });

  it("puts the object with its key, body and content type", async () => {
    s3Mock.on(PutObjectCommand).resolves({ ETag: '"abc"' });
    const body = JSON.stringify({ n: 1 });
    expect(await sink().putObject("sluice-exports", "runs/../r_1-0.json", body, "application/json")).toEqual({
      stored: true,
    });
    expect(s3Mock.commandCalls(PutObjectCommand).map((call) => call.args[0].input)).toEqual([
      // A key is a name in S3, not a path: `..` is part of it, as the user wrote it.
      { Bucket: "sluice-exports", Key: "runs/../r_1-0.json", Body: body, ContentType: "application/json" },
    ]);
  });

  it("names the account that must own the bucket when it is given, so S3 refuses another account's bucket", async () => {
    s3Mock
      .on(PutObjectCommand)
      .rejects(
        new S3ServiceException({ name: "AccessDenied", $fault: "client", $metadata: {}, message: "Access Denied" }),
      );
    const owned = new S3ObjectSink({
      s3: new S3Client({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
      buckets: ["sluice-exports"],
      expectedOwner: "123456789012",
    });
    expect(await owned.putObject("sluice-exports", "k", "{}", "application/json")).toEqual({
      error: "AccessDenied: Access Denied",
    });
    expect(s3Mock.commandCalls(PutObjectCommand)[0]?.args[0].input.ExpectedBucketOwner).toBe("123456789012");
  });

  it.each([
    ["a bucket not listed", "someone-elses-bucket", "k", /not allowed/],
    ["an empty key", "sluice-exports", "", /key is empty/],
    ["a key over 1024 bytes", "sluice-exports", "é".repeat(513), /over 1024 bytes/],
  ])("refuses %s without calling S3", async (_what, bucket, key, error) => {
    expect(await sink().putObject(bucket, key, "{}", "application/json")).toEqual({
      error: expect.stringMatching(error),
    });
    expect(s3Mock.calls()).toHaveLength(0);
  });

  it("answers S3's refusal, or a failure on the way, as an error to retry, never a rejection", async () => {
    const denied = new S3ServiceException({
      name: "AccessDenied",
      $fault: "client",
      $metadata: { httpStatusCode: 403 },
      message: "Access Denied",
    });
    s3Mock.on(PutObjectCommand).rejectsOnce(denied).rejectsOnce(new Error("socket hang up")).rejects({});
    const put = () => sink().putObject("sluice-exports", "k.json", "{}", "application/json");
    expect(await put()).toEqual({ error: "AccessDenied: Access Denied" });
    expect(await put()).toEqual({ error: "Error: socket hang up" });
    expect(await put()).toEqual({ error: expect.stringMatching(/: S3 refused the object$/) });
  });
});
