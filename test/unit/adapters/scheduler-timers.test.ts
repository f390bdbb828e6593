import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
} from "@aws-sdk/client-scheduler";
import { mockClient } from "aws-sdk-client-mock";
import { beforeEach, describe, expect, it } from "vitest";
import { SCHEDULED_TIME_PLACEHOLDER, SchedulerTimers } from "#adapters/aws/scheduler-timers";
import { timerTargetOf } from "#core/ports/timers";
import { scheduledTimes, timerInvokerInputSchema } from "#internal/timer-invoker";

const schedulerMock = mockClient(SchedulerClient);
const INVOKER = "arn:aws:lambda:eu-west-1:123456789012:function:SluiceService-TimerInvoker";
const ROLE = "arn:aws:iam::123456789012:role/SluiceService-SchedulerRole";
const SOURCE = "dc_01kab00000abcdefghjkmn";

const timers = () =>
  new SchedulerTimers({
    scheduler: new SchedulerClient({ region: "eu-west-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } }),
    groupName: "sluice-dev",
    timerInvokerArn: INVOKER,
    roleArn: ROLE,
  });

const expected = (expression: string, input: Record<string, unknown>, timezone?: string) => ({
  Name: SOURCE,
  GroupName: "sluice-dev",
  ScheduleExpression: expression,
  ...(timezone ? { ScheduleExpressionTimezone: timezone } : {}),
  FlexibleTimeWindow: { Mode: "OFF" },
  State: "ENABLED",
  Description: `Sluice timer of ${SOURCE}`,
  Target: {
    Arn: INVOKER,
    RoleArn: ROLE,
    Input: JSON.stringify(input),
    RetryPolicy: { MaximumEventAgeInSeconds: 300, MaximumRetryAttempts: 3 },
  },
});

beforeEach(() => {
  schedulerMock.reset();
});

describe("SchedulerTimers.schedule", () => {
  it("creates a schedule named by the source that invokes the timer invoker with the scheduled time", async () => {
    schedulerMock.on(CreateScheduleCommand).resolves({ ScheduleArn: "arn:x" });
    await timers().schedule({ sourceId: SOURCE }, { intervalSeconds: 900 });
    const calls = schedulerMock.commandCalls(CreateScheduleCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toEqual(
      expected("rate(15 minutes)", { sourceId: SOURCE, scheduledAt: "<aws.scheduler.scheduled-time>" }),
    );
    expect(schedulerMock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
  });

  it("fires once a minute with everySeconds and times for an interval under a minute", async () => {
    schedulerMock.on(CreateScheduleCommand).resolves({});
    await timers().schedule({ sourceId: SOURCE }, { intervalSeconds: 15 });
    expect(schedulerMock.commandCalls(CreateScheduleCommand)[0]!.args[0].input).toEqual(
      expected("rate(1 minute)", {
        sourceId: SOURCE,
        scheduledAt: "<aws.scheduler.scheduled-time>",
        everySeconds: 15,
        times: 4,
      }),
    );
  });

  it("sends an input the timer invoker accepts once Scheduler has filled in the time", () => {
    const { Target } = timers().scheduleRequest({ sourceId: SOURCE }, { intervalSeconds: 20 });
    const filled = Target!.Input!.replace(SCHEDULED_TIME_PLACEHOLDER, "2026-11-20T10:00:00Z");
    const input = timerInvokerInputSchema.parse(JSON.parse(filled));
    const at = Date.parse("2026-11-20T10:00:00Z");
    expect(scheduledTimes(input, at)).toEqual([at, at + 20_000, at + 40_000]);
  });

  it("passes a cron timer's time zone", async () => {
    schedulerMock.on(CreateScheduleCommand).resolves({});
    await timers().schedule({ sourceId: SOURCE }, { cron: "0 9 * * 1", timezone: "Europe/Paris" });
    const input = schedulerMock.commandCalls(CreateScheduleCommand)[0]!.args[0].input;
    expect(input.ScheduleExpression).toMatch(/^cron\(0 9 \? \* 2 \*\)$/);
    expect(input.ScheduleExpressionTimezone).toBe("Europe/Paris");
  });

  it("replaces an existing schedule of the source with UpdateSchedule", async () => {
    schedulerMock
      .on(CreateScheduleCommand)
      .rejects(
        new ConflictException({ message: `Schedule ${SOURCE} already exists.`, Message: "exists", $metadata: {} }),
      );
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    await timers().schedule({ sourceId: SOURCE }, { intervalSeconds: 3600 });
    const update = schedulerMock.commandCalls(UpdateScheduleCommand);
    expect(update).toHaveLength(1);
    expect(update[0]!.args[0].input).toEqual(
      expected("rate(1 hour)", { sourceId: SOURCE, scheduledAt: "<aws.scheduler.scheduled-time>" }),
    );
  });

  it("throws other failures", async () => {
    schedulerMock.on(CreateScheduleCommand).rejects(new Error("AccessDenied"));
    await expect(timers().schedule({ sourceId: SOURCE }, { intervalSeconds: 60 })).rejects.toThrow("AccessDenied");
    expect(schedulerMock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
  });
});

describe("SchedulerTimers.cancel", () => {
  it("deletes the source's schedule from the group", async () => {
    schedulerMock.on(DeleteScheduleCommand).resolves({});
    await timers().cancel({ sourceId: SOURCE });
    expect(schedulerMock.commandCalls(DeleteScheduleCommand)[0]!.args[0].input).toEqual({
      Name: SOURCE,
      GroupName: "sluice-dev",
    });
  });

  it("succeeds when there is no schedule", async () => {
    schedulerMock
      .on(DeleteScheduleCommand)
      .rejects(new ResourceNotFoundException({ message: "Schedule not found", Message: "not found", $metadata: {} }));
    await expect(timers().cancel({ sourceId: SOURCE })).resolves.toBeUndefined();
  });
});

describe("SchedulerTimers with a workflow's timer trigger", () => {
  const WORKFLOW = "p_01kab00000abcdefghjkmn";
  const TIMER = "ti_01kab00000abcdefghjkmp";
  const target = { workflowId: WORKFLOW, timerId: TIMER };

  it("names the schedule by the ti_ id and gives the invoker the workflow and the timer", async () => {
    schedulerMock.on(CreateScheduleCommand).resolves({});
    await timers().schedule(target, { intervalSeconds: 15 });
    const input = schedulerMock.commandCalls(CreateScheduleCommand)[0]!.args[0].input;
    expect(input).toEqual({
      ...expected("rate(1 minute)", {
        workflowId: WORKFLOW,
        timerId: TIMER,
        scheduledAt: "<aws.scheduler.scheduled-time>",
        everySeconds: 15,
        times: 4,
      }),
      Name: TIMER,
      Description: `Sluice timer ${TIMER} of workflow ${WORKFLOW}`,
    });
  });

  it("sends an input the invoker reads back as the same target once Scheduler has filled in the time", () => {
    const { Target, ScheduleExpression, ScheduleExpressionTimezone } = timers().scheduleRequest(target, {
      cron: "30 8 * * *",
      timezone: "Asia/Tokyo",
    });
    expect([ScheduleExpression, ScheduleExpressionTimezone]).toEqual(["cron(30 8 * * ? *)", "Asia/Tokyo"]);
    const filled = Target!.Input!.replace(SCHEDULED_TIME_PLACEHOLDER, "2026-11-20T10:00:00Z");
    const input = timerInvokerInputSchema.parse(JSON.parse(filled));
    expect(timerTargetOf(input)).toEqual(target);
    expect(scheduledTimes(input, 0)).toEqual([Date.parse("2026-11-20T10:00:00Z")]);
  });

  it("replaces an existing schedule of the timer and deletes it by its ti_ id", async () => {
    schedulerMock
      .on(CreateScheduleCommand)
      .rejects(new ConflictException({ message: "exists", Message: "exists", $metadata: {} }));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    schedulerMock.on(DeleteScheduleCommand).resolves({});
    await timers().schedule(target, { intervalSeconds: 3600 });
    expect(schedulerMock.commandCalls(UpdateScheduleCommand)[0]!.args[0].input).toMatchObject({
      Name: TIMER,
      ScheduleExpression: "rate(1 hour)",
    });
    await timers().cancel(target);
    expect(schedulerMock.commandCalls(DeleteScheduleCommand)[0]!.args[0].input).toEqual({
      Name: TIMER,
      GroupName: "sluice-dev",
    });
  });
});
