/**
 * `PausedRunStore` on AWS: the rows in DynamoDB (`DynamoDbPausedRuns`) and one EventBridge
 * Scheduler one-time schedule per pause at its `dueMs` (`at(...)`, deleted by Scheduler once it
 * fired), in the stack's schedule group, named after the run. Each invokes the paused-run
 * dispatcher (`functions/internal/paused-run-dispatcher.ts`) with `{pauseId}`, which dispatches
 * the pause as its time having come (`dispatchDuePause`) and queues its continuation.
 *
 * The row decides, the schedule only wakes: a schedule that fires for a pause that is gone
 * dispatches nothing, and one that fires for a pause a URL took queues its continuation again
 * under the same run id (which covers a continuation lost after the URL's request). Forgetting
 * pauses (a deleted workflow's, a continuation that ended) also deletes their schedules, so they
 * neither count against the account's schedule quota nor invoke the dispatcher for nothing for up
 * to a year; where that fails, the failure is logged, not thrown, as the rows are gone anyway.
 */
import {
  CreateScheduleCommand,
  type CreateScheduleCommandInput,
  type SchedulerClient,
  UpdateScheduleCommand,
} from "@aws-sdk/client-scheduler";
import type { PausedRunDispatcherInput } from "#config/shared-names";
import type { Clock } from "#core/ports/clock";
import type { Logger } from "#core/ports/logger";
import type { PauseDispatch, PausedRun, PausedRunStore } from "#core/ports/paused-runs";
import { atExpression, deleteSchedulesQuietly, scheduleName } from "./scheduler-delayed-emits.ts";
import { hasErrorName } from "./sdk-errors.ts";

/**
 * Schedules a workflow's removal deletes at most: 8 at a time, about 2 s (decision 556). The rest
 * fire for nothing and delete themselves.
 */
export const SCHEDULE_DELETES_PER_REMOVAL = 200;

export interface SchedulerPausedRunsOptions {
  readonly rows: PausedRunStore;
  readonly scheduler: SchedulerClient;
  /**
   * The stack's schedule group (`SLUICE_SCHEDULE_GROUP`), shared with timers and delayed emits:
   * needed to make and delete schedules. Absent on a function that only reads and dispatches
   * pauses (the endpoint function's URLs, the dispatcher).
   */
  readonly groupName?: string;
  /**
   * What schedules invoke: the dispatcher's ARN (`SLUICE_PAUSED_RUN_DISPATCHER_ARN`) and the role
   * Scheduler assumes (`SLUICE_SCHEDULER_ROLE_ARN`). Present on the functions that run workflows.
   */
  readonly target?: { readonly dispatcherArn: string; readonly roleArn: string };
  readonly clock: Clock;
  readonly log: Logger;
}

/** The schedule of one pause: `pr-<run id>`, or a digest of it if that is no valid name. */
export function pausedRunScheduleName(runId: string): string {
  return scheduleName("pr", runId, runId);
}

export class SchedulerPausedRuns implements PausedRunStore {
  readonly #options: SchedulerPausedRunsOptions;

  constructor(options: SchedulerPausedRunsOptions) {
    this.#options = options;
  }

  /** The request that makes (or, as an update, remakes) one pause's schedule. */
  scheduleRequest(pause: PausedRun): CreateScheduleCommandInput {
    const target = this.#target();
    const input: PausedRunDispatcherInput = { pauseId: pause.id };
    return {
      Name: pausedRunScheduleName(pause.id),
      GroupName: target.groupName,
      ScheduleExpression: atExpression(pause.dueMs, this.#options.clock.nowMs()),
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      // One-time: Scheduler deletes it after it invoked the dispatcher, so none is left behind.
      ActionAfterCompletion: "DELETE",
      Description: `Sluice paused run ${pause.id} of ${pause.workflowId}`,
      Target: {
        Arn: target.dispatcherArn,
        RoleArn: target.roleArn,
        Input: JSON.stringify(input),
        // Scheduler's own defaults (a day, 185 tries) for handing it to Lambda: a delay that does
        // not go on, or a suspension that never times out, would hold its run for good.
        RetryPolicy: { MaximumEventAgeInSeconds: 86_400, MaximumRetryAttempts: 185 },
      },
    };
  }

  /**
   * Row first, then schedule: a schedule never fires for a row that was not written. A run done
   * again after a crash pauses again under the same id, at a later time: its schedule exists, and
   * is updated to the new time (a delay must not go on at the first try's). A pause whose schedule
   * could be neither made nor updated is forgotten again (it would never come due, yet count
   * against the workflow's bound) and the failure thrown, so the run fails and is retried.
   */
  async add(pause: PausedRun): Promise<void> {
    const request = this.scheduleRequest(pause);
    await this.#options.rows.add(pause);
    try {
      try {
        await this.#options.scheduler.send(new CreateScheduleCommand(request));
      } catch (error) {
        if (!hasErrorName(error, "ConflictException")) throw error;
        await this.#options.scheduler.send(new UpdateScheduleCommand(request));
      }
    } catch (error) {
      await this.#options.rows.remove(pause.id);
      throw error;
    }
  }

  get(id: string): Promise<PausedRun | undefined> {
    return this.#options.rows.get(id);
  }

  /** Only the row: the schedule stays, for a dispatch by a URL whose continuation gets lost. */
  dispatch(id: string, dispatch: PauseDispatch): Promise<{ pause: PausedRun; won: boolean } | undefined> {
    return this.#options.rows.dispatch(id, dispatch);
  }

  /**
   * The continuation ended: the row goes, and the schedule with it, unless it fired already (a
   * delay, a rerun or a timed-out suspension: Scheduler deleted it). Left, it would fire for
   * nothing, up to a year later (a suspension resumed at once), and count against the quota.
   */
  async remove(id: string): Promise<boolean> {
    const removed = await this.#options.rows.remove(id);
    await this.#deleteSchedules([id]);
    return removed;
  }

  countPending(workflowId: string): Promise<number> {
    return this.#options.rows.countPending(workflowId);
  }

  touch(id: string, atMs: number): Promise<void> {
    return this.#options.rows.touch(id, atMs);
  }

  stateBytesOf(workflowId: string): Promise<number> {
    return this.#options.rows.stateBytesOf(workflowId);
  }

  /**
   * Forgets a deleted workflow's pauses, and deletes the schedules of at most
   * {@link SCHEDULE_DELETES_PER_REMOVAL} of them: the deletion runs inside a `DELETE` request (30 s
   * at API Gateway), and a workflow may hold 10,000 pauses. A schedule left fires for a pause that
   * is gone, which dispatches nothing, and then deletes itself (`ActionAfterCompletion: DELETE`).
   */
  async removeWorkflow(workflowId: string): Promise<string[]> {
    const removed = await this.#options.rows.removeWorkflow(workflowId);
    await this.#deleteSchedules(removed.slice(0, SCHEDULE_DELETES_PER_REMOVAL));
    const left = removed.length - SCHEDULE_DELETES_PER_REMOVAL;
    if (left > 0) {
      this.#options.log.warn("schedules of a deleted workflow's paused runs left to fire for nothing", {
        workflow_id: workflowId,
        left,
      });
    }
    return removed;
  }

  /** Deletes the schedules of `runIds`' pauses; one that is gone (it fired) is fine, other failures are logged. */
  #deleteSchedules(runIds: readonly string[]): Promise<void> {
    return deleteSchedulesQuietly(this.#options, runIds.map(pausedRunScheduleName), {
      one: "schedule of a forgotten paused run",
      all: "schedules of forgotten paused runs",
    });
  }

  #target() {
    const { target, groupName } = this.#options;
    if (!target || groupName === undefined) {
      throw new Error("runs cannot pause here: this function was deployed without the paused-run dispatcher's ARN");
    }
    return { ...target, groupName };
  }
}
