/**
 * `Timers` on AWS: one EventBridge Scheduler schedule per timer, in the stack's schedule group,
 * named by `timerTargetId`: a source's by its `dc_` id, a workflow's timer trigger by its `ti_` id.
 * Each fires the timer-invoker function (`functions/internal/timer-invoker.ts`) with the target
 * (`{sourceId}` or `{workflowId, timerId}`) and `scheduledAt`; Scheduler fills in `scheduledAt` (its
 * `scheduled-time` context attribute), so the run's `event.timestamp` is the scheduled time, not the
 * delivery time, and a tick Scheduler delivers twice carries the same time (a workflow's run id is
 * made from it, so it runs once).
 *
 * Scheduler's finest rate is one minute. A shorter interval that divides 60 fires once a minute
 * with `everySeconds` and `times` in the input, and the invoker fires the timer `times` times,
 * `everySeconds` apart, within that one invocation (`toAwsScheduleExpression` in `#core/timer-schedule`).
 */
import {
  CreateScheduleCommand,
  type CreateScheduleCommandInput,
  DeleteScheduleCommand,
  type SchedulerClient,
  UpdateScheduleCommand,
} from "@aws-sdk/client-scheduler";
import type { TimerInvokerInput } from "#config/shared-names";
import type { TimerSpec } from "#core/component-model";
import { type Timers, type TimerTarget, timerTargetId, timerTargetOf } from "#core/ports/timers";
import { type AwsScheduleExpression, toAwsScheduleExpression } from "#core/timer-schedule";
import { hasErrorName } from "./sdk-errors.ts";

/** Replaced by Scheduler with the time the schedule was due, in ISO 8601. */
export const SCHEDULED_TIME_PLACEHOLDER = "<aws.scheduler.scheduled-time>";

export interface SchedulerTimersOptions {
  readonly scheduler: SchedulerClient;
  /** Schedule group (`SLUICE_SCHEDULE_GROUP`). */
  readonly groupName: string;
  /** ARN of the timer-invoker function (`SLUICE_TIMER_INVOKER_ARN`). */
  readonly timerInvokerArn: string;
  /** Role Scheduler assumes to invoke it (`SLUICE_SCHEDULER_ROLE_ARN`). */
  readonly roleArn: string;
  /** @default toAwsScheduleExpression of `#core/timer-schedule` */
  readonly toExpression?: (spec: TimerSpec) => AwsScheduleExpression;
}

export class SchedulerTimers implements Timers {
  readonly #options: SchedulerTimersOptions;

  constructor(options: SchedulerTimersOptions) {
    this.#options = options;
  }

  /** The request that makes (or remakes) a timer's schedule; `UpdateSchedule` takes the same fields. */
  scheduleRequest(target: TimerTarget, spec: TimerSpec): CreateScheduleCommandInput {
    const { expression, timezone, subMinuteRepeats } = (this.#options.toExpression ?? toAwsScheduleExpression)(spec);
    // Only the target's own fields: the input is exactly what the invoker's schema takes.
    const input: TimerInvokerInput = { ...timerTargetOf(target), scheduledAt: SCHEDULED_TIME_PLACEHOLDER };
    if (subMinuteRepeats) {
      input.everySeconds = subMinuteRepeats.everySeconds;
      input.times = subMinuteRepeats.times;
    }
    return {
      Name: timerTargetId(target),
      GroupName: this.#options.groupName,
      ScheduleExpression: expression,
      ...(timezone !== undefined ? { ScheduleExpressionTimezone: timezone } : {}),
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      Description:
        "sourceId" in target
          ? `Sluice timer of ${target.sourceId}`
          : `Sluice timer ${target.timerId} of workflow ${target.workflowId}`,
      Target: {
        Arn: this.#options.timerInvokerArn,
        RoleArn: this.#options.roleArn,
        Input: JSON.stringify(input),
        // Retries cover a failed hand-over to Lambda only; a fire more than 5 minutes late is
        // dropped, the next one comes anyway.
        RetryPolicy: { MaximumEventAgeInSeconds: 300, MaximumRetryAttempts: 3 },
      },
    };
  }

  async schedule(target: TimerTarget, spec: TimerSpec): Promise<void> {
    const request = this.scheduleRequest(target, spec);
    try {
      await this.#options.scheduler.send(new CreateScheduleCommand(request));
    } catch (error) {
      if (!hasErrorName(error, "ConflictException")) throw error;
      // A schedule of that name exists (a re-deploy, or a retried request): replace all its fields.
      await this.#options.scheduler.send(new UpdateScheduleCommand(request));
    }
  }

  async cancel(target: TimerTarget): Promise<void> {
    try {
      await this.#options.scheduler.send(
        new DeleteScheduleCommand({ Name: timerTargetId(target), GroupName: this.#options.groupName }),
      );
    } catch (error) {
      if (!hasErrorName(error, "ResourceNotFoundException")) throw error;
    }
  }
}
