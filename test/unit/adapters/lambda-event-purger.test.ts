import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { LambdaEventPurger } from "#adapters/aws/lambda-event-purger";
import { purgeJobSchema } from "#internal/event-purger";

const lambdaMock = mockClient(LambdaClient);
const purger = () =>
  new LambdaEventPurger({
    lambda: new LambdaClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    functionName: "SluiceService-EventPurger",
  });

beforeEach(() => {
  lambdaMock.reset();
});

describe("LambdaEventPurger", () => {
  it("invokes the event purger asynchronously with the source id as the payload", async () => {
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
    await purger().purgeLater("dc_01kab00000abcdefghjkmn");
    const calls = lambdaMock.commandCalls(InvokeCommand);
    expect(calls).toHaveLength(1);
    const { Payload, ...rest } = calls[0]!.args[0].input;
    expect(rest).toEqual({ FunctionName: "SluiceService-EventPurger", InvocationType: "Event" });
    const payload = JSON.parse(new TextDecoder().decode(Payload as Uint8Array));
    expect(payload).toEqual({ sourceId: "dc_01kab00000abcdefghjkmn" });
    // What the purger function accepts.
    expect(purgeJobSchema.parse(payload)).toEqual(payload);
  });

  it("throws when Lambda refuses the invocation, so the caller can log it", async () => {
    lambdaMock.on(InvokeCommand).rejects(new Error("TooManyRequestsException"));
    await expect(purger().purgeLater("dc_x")).rejects.toThrow("TooManyRequestsException");
  });
});
