import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { LambdaDeployFinisher } from "#adapters/aws/lambda-deploy-finisher";

const lambdaMock = mockClient(LambdaClient);
const finisher = () =>
  new LambdaDeployFinisher({
    lambda: new LambdaClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    functionName: "SluiceService-DeployFinisher",
  });

beforeEach(() => {
  lambdaMock.reset();
});

describe("LambdaDeployFinisher", () => {
  it("invokes the deploy finisher asynchronously with the source id as the payload", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
    await finisher().finishLater("dc_01kab00000abcdefghjkmn");
    const calls = lambdaMock.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const { Payload, ...rest } = calls[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: "SluiceService-DeployFinisher", InvocationType: "Event" });
    expect(JSON.parse(new TextDecoder().decode(Payload as Uint8Array))).toEqual({
      sourceId: "dc_01kab00000abcdefghjkmn",
    });
  });

  it("throws when Lambda refuses the invocation, so the deploy fails and removes its source", async () => {
    lambdaMock.on(InvokeCommand).rejects(new Error("TooManyRequestsException"));
    await expect(finisher().finishLater("dc_x")).rejects.toThrow("TooManyRequestsException");
  });
});
