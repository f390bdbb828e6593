import { describe, expect, it } from "vitest";
import { AWS_COMPUTE_ENV, loadAwsComputeConfig, SCHEDULES_ENV, SOURCE_FUNCTIONS_ENV } from "#config/aws-compute-env";
import { ENV } from "#config/env";

const manage = Object.fromEntries(
  [...SOURCE_FUNCTIONS_ENV, ...SCHEDULES_ENV, AWS_COMPUTE_ENV.describerFunction].map((name) => [
    name,
    `value of ${name}`,
  ]),
);

/** The error of an invalid configuration: one line per variable, `NAME: reason`, in this order. */
const naming = (...names: string[]) => new RegExp(names.map((name) => `${name}: `).join("[\\s\\S]*"));

describe("loadAwsComputeConfig", () => {
  it("defaults the stage and leaves unset groups undefined", () => {
    // Strict: every field is there, undefined where its variables are unset.
    expect(loadAwsComputeConfig({})).toStrictEqual({
      stage: "default",
      sourceRunnerFunction: undefined,
      secretsKeyArn: undefined,
      describerFunction: undefined,
      functions: undefined,
      schedules: undefined,
      delayedEmits: undefined,
      pausedRuns: undefined,
      eventPurgerFunction: undefined,
      deployFinisherFunction: undefined,
      npmRegistry: undefined,
      stream: { url: undefined, pollIntervalMs: 500, endMarginMs: 5_000 },
      eventBusName: undefined,
      deliveryQueueUrl: undefined,
      deliveryRetryQueueUrl: undefined,
      runtime: {
        publicUrl: "",
        invocationTimeoutMs: 30_000,
        emitLimits: { maxEmits: 1_000, maxEmitBytes: 8 * 1024 * 1024 },
        workflowLimits: { maxSends: 100, maxSendBytes: 4 * 1024 * 1024, maxExportBytes: 8 * 1024 * 1024 },
      },
    });
  });

  it("reads the event purger's and the deploy finisher's names and the stream settings, the stream URL without its trailing slash", () => {
    const config = loadAwsComputeConfig({
      [AWS_COMPUTE_ENV.eventPurgerFunction]: "SluiceService-EventPurger",
      [AWS_COMPUTE_ENV.deployFinisherFunction]: "SluiceService-DeployFinisher",
      [AWS_COMPUTE_ENV.streamUrl]: "https://abc.lambda-url.eu-west-1.on.aws/",
      [AWS_COMPUTE_ENV.streamPollMs]: "250",
      [AWS_COMPUTE_ENV.streamEndMarginMs]: "8000",
    });
    expect(config.eventPurgerFunction).toBe("SluiceService-EventPurger");
    expect(config.deployFinisherFunction).toBe("SluiceService-DeployFinisher");
    expect(config.stream).toEqual({
      url: "https://abc.lambda-url.eu-west-1.on.aws",
      pollIntervalMs: 250,
      endMarginMs: 8_000,
    });
  });

  it("reads the event bus's name and the delivery queues' URLs, undefined where empty", () => {
    const config = loadAwsComputeConfig({
      [AWS_COMPUTE_ENV.eventBusName]: "sluice-dev",
      [AWS_COMPUTE_ENV.deliveryQueueUrl]: "https://sqs.eu-west-1.amazonaws.com/1/Deliveries.fifo",
      [AWS_COMPUTE_ENV.deliveryRetryQueueUrl]: "",
    });
    expect(config).toMatchObject({
      eventBusName: "sluice-dev",
      deliveryQueueUrl: "https://sqs.eu-west-1.amazonaws.com/1/Deliveries.fifo",
    });
    expect(config.deliveryRetryQueueUrl).toBeUndefined();
  });

  it("refuses stream settings out of range, naming each variable", () => {
    const env = {
      [AWS_COMPUTE_ENV.streamUrl]: "not a url",
      [AWS_COMPUTE_ENV.streamPollMs]: "10",
      [AWS_COMPUTE_ENV.streamEndMarginMs]: "120000",
    };
    expect(() => loadAwsComputeConfig(env)).toThrow(
      naming(AWS_COMPUTE_ENV.streamUrl, AWS_COMPUTE_ENV.streamPollMs, AWS_COMPUTE_ENV.streamEndMarginMs),
    );
  });

  it("reads the public URL without its trailing slash and the invocation time limit", () => {
    const config = loadAwsComputeConfig({
      [ENV.publicUrl]: "https://abc.execute-api.eu-west-1.amazonaws.com/",
      [ENV.invocationTimeoutMs]: "45000",
    });
    expect(config.runtime).toEqual({
      publicUrl: "https://abc.execute-api.eu-west-1.amazonaws.com",
      invocationTimeoutMs: 45_000,
      emitLimits: { maxEmits: 1_000, maxEmitBytes: 8 * 1024 * 1024 },
      workflowLimits: { maxSends: 100, maxSendBytes: 4 * 1024 * 1024, maxExportBytes: 8 * 1024 * 1024 },
    });
  });

  it("reads the npm registry deploying functions install from, and refuses one that is not a URL", () => {
    expect(loadAwsComputeConfig({ [ENV.npmRegistry]: "https://npm.example.com/" }).npmRegistry).toBe(
      "https://npm.example.com/",
    );
    expect(loadAwsComputeConfig({}).npmRegistry).toBeUndefined();
    expect(() => loadAwsComputeConfig({ [ENV.npmRegistry]: "npm.example.com" })).toThrow(naming(ENV.npmRegistry));
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
    expect(config.describerFunction).toBe(`value of ${AWS_COMPUTE_ENV.describerFunction}`);
    expect(config.functions).toEqual({
      sourceRoleArn: `value of ${AWS_COMPUTE_ENV.sourceRoleArn}`,
      runtimeLayerArn: `value of ${AWS_COMPUTE_ENV.runtimeLayerArn}`,
      sourceLogGroup: `value of ${AWS_COMPUTE_ENV.sourceLogGroup}`,
    });
    expect(config.schedules).toEqual({
      timerInvokerArn: `value of ${AWS_COMPUTE_ENV.timerInvokerArn}`,
      schedulerRoleArn: `value of ${AWS_COMPUTE_ENV.schedulerRoleArn}`,
      scheduleGroup: `value of ${AWS_COMPUTE_ENV.scheduleGroup}`,
    });
  });

  it("names every missing variable of a partly set group, and a bad stage, at once", () => {
    const { [AWS_COMPUTE_ENV.sourceLogGroup]: _l, [AWS_COMPUTE_ENV.scheduleGroup]: _g, ...partial } = manage;
    const env = { ...partial, [AWS_COMPUTE_ENV.stage]: "9bad", [ENV.invocationTimeoutMs]: "soon" };
    expect(() => loadAwsComputeConfig(env)).toThrow(
      naming(
        AWS_COMPUTE_ENV.stage,
        ENV.invocationTimeoutMs,
        AWS_COMPUTE_ENV.sourceLogGroup,
        AWS_COMPUTE_ENV.scheduleGroup,
      ),
    );
  });

  it("reads the delayed emits' schedules apart from the deployers' group: cancel only, or schedule too", () => {
    const group = { [AWS_COMPUTE_ENV.scheduleGroup]: "sluice-dev" };
    const cancelOnly = loadAwsComputeConfig(group);
    expect(cancelOnly.schedules).toBeUndefined();
    expect(cancelOnly.delayedEmits).toEqual({ scheduleGroup: "sluice-dev", target: undefined });
    const scheduling = loadAwsComputeConfig({
      ...group,
      [AWS_COMPUTE_ENV.schedulerRoleArn]: "arn:aws:iam::1:role/s",
      [AWS_COMPUTE_ENV.delayedEmitDelivererArn]: "arn:aws:lambda:eu-west-1:1:function:d",
    });
    expect(scheduling.schedules).toBeUndefined();
    expect(scheduling.delayedEmits).toEqual({
      scheduleGroup: "sluice-dev",
      target: { delivererArn: "arn:aws:lambda:eu-west-1:1:function:d", roleArn: "arn:aws:iam::1:role/s" },
    });
    expect(() =>
      loadAwsComputeConfig({ [AWS_COMPUTE_ENV.delayedEmitDelivererArn]: "arn:aws:lambda:eu-west-1:1:function:d" }),
    ).toThrow(naming(AWS_COMPUTE_ENV.scheduleGroup, AWS_COMPUTE_ENV.schedulerRoleArn));
  });

  it("reads the paused runs' schedules the same way, with their own target", () => {
    const group = { [AWS_COMPUTE_ENV.scheduleGroup]: "sluice-dev" };
    expect(loadAwsComputeConfig(group).pausedRuns).toEqual({ scheduleGroup: "sluice-dev", target: undefined });
    const scheduling = loadAwsComputeConfig({
      ...group,
      [AWS_COMPUTE_ENV.schedulerRoleArn]: "arn:aws:iam::1:role/s",
      [AWS_COMPUTE_ENV.pausedRunDispatcherArn]: "arn:aws:lambda:eu-west-1:1:function:p",
    });
    expect(scheduling.pausedRuns).toEqual({
      scheduleGroup: "sluice-dev",
      target: { dispatcherArn: "arn:aws:lambda:eu-west-1:1:function:p", roleArn: "arn:aws:iam::1:role/s" },
    });
    // The delayed emits' target is another function: these settings do not make one.
    expect(scheduling.delayedEmits).toEqual({ scheduleGroup: "sluice-dev", target: undefined });
    expect(() =>
      loadAwsComputeConfig({ [AWS_COMPUTE_ENV.pausedRunDispatcherArn]: "arn:aws:lambda:eu-west-1:1:function:p" }),
    ).toThrow(naming(AWS_COMPUTE_ENV.scheduleGroup, AWS_COMPUTE_ENV.schedulerRoleArn));
  });
});
