import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { S3InstalledTrees } from "#adapters/aws/s3-installed-trees";

const s3Mock = mockClient(S3Client);
const KEY = "a".repeat(64);
const trees = () =>
  new S3InstalledTrees({
    s3: new S3Client({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    bucket: "sluice-dev-packages",
    expectedOwner: "123456789012",
  });
const named = (name: string) => Object.assign(new Error(name), { name });

beforeEach(() => {
  s3Mock.reset();
});

describe("S3InstalledTrees", () => {
  it("reads a tree from npm-trees/<key>.zip in the stack's own bucket", async () => {
    // The SDK's body: a stream with its helpers; only transformToByteArray is read.
    const Body = { transformToByteArray: async () => new Uint8Array(Buffer.from("zip")) };
    s3Mock.on(GetObjectCommand).resolves({ Body: Body as never, ContentLength: 3 });
    expect(Buffer.from((await trees().get(KEY))!).toString()).toBe("zip");
    expect(s3Mock.commandCalls(GetObjectCommand)[0]!.args[0].input).toEqual({
      Bucket: "sluice-dev-packages",
      Key: `npm-trees/${KEY}.zip`,
      ExpectedBucketOwner: "123456789012",
    });
  });

  it("answers none for a key not stored yet, and throws S3's other failures", async () => {
    s3Mock.on(GetObjectCommand).rejectsOnce(named("NoSuchKey")).rejectsOnce(named("AccessDenied"));
    expect(await trees().get(KEY)).toBeUndefined();
    await expect(trees().get(KEY)).rejects.toThrow("AccessDenied");
  });

  it("stores a tree only where none is (If-None-Match), and takes another's store of the same key as done", async () => {
    s3Mock.on(PutObjectCommand).resolvesOnce({}).rejectsOnce(named("PreconditionFailed"));
    await trees().put(KEY, new Uint8Array([1, 2]));
    await trees().put(KEY, new Uint8Array([1, 2]));
    const input = s3Mock.commandCalls(PutObjectCommand)[0]!.args[0].input;
    expect({ ...input, Body: undefined }).toEqual({
      Bucket: "sluice-dev-packages",
      Key: `npm-trees/${KEY}.zip`,
      ExpectedBucketOwner: "123456789012",
      ContentType: "application/zip",
      IfNoneMatch: "*",
      Body: undefined,
    });
  });

  it("refuses a key that is not a hash, so no other object of the bucket can be named", async () => {
    await expect(trees().get("../config")).rejects.toThrow(/sha256/);
    await expect(trees().put("x/../../y", new Uint8Array())).rejects.toThrow(/sha256/);
    expect(s3Mock.calls()).toHaveLength(0);
  });
});
