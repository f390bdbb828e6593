import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { LambdaRunQueue } from "#adapters/aws/lambda-run-queue";
import type { RunJob } from "#core/ports/run-queue";

const lambdaMock = mockClient(LambdaClient);
const queue = () =>
  new LambdaRunQueue({
    lambda: new LambdaClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    functionName: "SluiceService-SourceRunner",
  });

beforeEach(() => {
  lambdaMock.reset();
});

describe("LambdaRunQueue", () => {
  it("invokes the source runner asynchronously with the job as the payload", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
    const job: RunJob = {
      sourceId: "dc_01kab00000abcdefghjkmn",
      trigger: "http",
      event: { method: "POST", body: "é" },
    };
    await queue().enqueue(job);
    const calls = lambdaMock.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const { Payload, ...rest } = calls[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: "SluiceService-SourceRunner", InvocationType: "Event" });
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual(job);
  });

  it("refuses a job over Lambda's asynchronous payload limit without calling Lambda", async () => {
    const job: RunJob = { sourceId: "dc_01kab00000abcdefghjkmn", trigger: "http", event: "x".repeat(1024 * 1024) };
    await expect(queue().enqueue(job)).rejects.toThrow(/larger than/);
    expect(lambdaMock.calls()).toHaveLength(0);
  });

  it("throws when Lambda refuses the job", async () => {
    lambdaMock.on(InvokeCommand).rejects(new Error("TooManyRequestsException"));
    await expect(queue().enqueue({ sourceId: "dc_x", trigger: "timer", event: null })).rejects.toThrow(
      "TooManyRequestsException",
    );
  });
});
