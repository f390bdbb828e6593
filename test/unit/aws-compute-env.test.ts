import { describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV, loadAwsComputeConfig, MANAGE_SOURCES_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";

const manage = Object.fromEntries(MANAGE_SOURCES_ENV.map((name) => [name, `value of ${name}`]));

describe("loadAwsComputeConfig", () => {
  it("defaults the stage and leaves unset groups undefined", () => {
    expect(loadAwsComputeConfig({})).toEqual({
      stage: "default",
      sourceRunnerFunction: undefined,
      secretsKeyArn: undefined,
      manage: undefined,
      runtime: { publicUrl: "", invocationTimeoutMs: 30_000 },
    });
  });

  it("reads the public URL without its trailing slash and the invocation time limit", () => {
    const config = loadAwsComputeConfig({
      [ENV.publicUrl]: "https://abc.execute-api.eu-west-1.amazonaws.com/",
      [ENV.invocationTimeoutMs]: "45000",
    });
    expect(config.runtime).toEqual({
      publicUrl: "https://abc.execute-api.eu-west-1.amazonaws.com",
      invocationTimeoutMs: 45_000,
    });
  });

  it("reads every group when set", () => {
    const config = loadAwsComputeConfig({
      ...manage,
      [AWS_COMPUTE_ENV.stage]: "dev",
      [AWS_COMPUTE_ENV.sourceRunnerFunction]: "runner",
      [AWS_COMPUTE_ENV.secretsKeyArn]: "arn:aws:kms:eu-west-1:1:key/x",
    });
    expect(config).toMatchObject({
      stage: "dev",
      sourceRunnerFunction: "runner",
      secretsKeyArn: "arn:aws:kms:eu-west-1:1:key/x",
    });
    expect(config.manage).toEqual({
      sourceRoleArn: `value of ${AWS_COMPUTE_ENV.sourceRoleArn}`,
      runtimeLayerArn: `value of ${AWS_COMPUTE_ENV.runtimeLayerArn}`,
      sourceLogGroup: `value of ${AWS_COMPUTE_ENV.sourceLogGroup}`,
      describerFunction: `value of ${AWS_COMPUTE_ENV.describerFunction}`,
      timerInvokerArn: `value of ${AWS_COMPUTE_ENV.timerInvokerArn}`,
      schedulerRoleArn: `value of ${AWS_COMPUTE_ENV.schedulerRoleArn}`,
      scheduleGroup: `value of ${AWS_COMPUTE_ENV.scheduleGroup}`,
    });
  });

  it("names every missing variable of a partly set group, and a bad stage, at once", () => {
    const { [AWS_COMPUTE_ENV.describerFunction]: _d, [AWS_COMPUTE_ENV.scheduleGroup]: _g, ...partial } = manage;
    const env = { ...partial, [AWS_COMPUTE_ENV.stage]: "9bad", [ENV.invocationTimeoutMs]: "soon" };
    expect(() => loadAwsComputeConfig(env)).toThrow(
      new RegExp(
        [
          AWS_COMPUTE_ENV.stage,
          ENV.invocationTimeoutMs,
          AWS_COMPUTE_ENV.describerFunction,
          AWS_COMPUTE_ENV.scheduleGroup,
        ]
          .map((name) => `${name}: `)
          .join("[\\s\\S]*"),
      ),
    );
  });
});
