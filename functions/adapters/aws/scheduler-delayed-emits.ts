/**
 * `DelayedEmitStore` on AWS: the rows in DynamoDB (`DynamoDbDelayedEmits`) and one EventBridge
 * Scheduler one-time schedule per delayed emit (`at(...)`, deleted by Scheduler once it fired), in
 * the stack's schedule group, named after the source and the `$in` id. Each invokes the delayed
 * emit deliverer (`functions/internal/delayed-emit-deliverer.ts`) with `{sourceId, inEventId}`,
 * which reads the row and emits it through the same path as an immediate emit.
 *
 * The row decides, the schedule only wakes: cancelling (deleting the `$in` event or the source)
 * removes the rows first, and a schedule that fires for a removed row emits nothing. Cancelling
 * also deletes the schedules, so they do not count against the account's schedule quota; where
 * that fails the failure is logged, not thrown, as the emit is cancelled anyway.
 */
import {
  CreateScheduleCommand,
  type CreateScheduleCommandInput,
  DeleteScheduleCommand,
  type SchedulerClient,
} from "@aws-sdk/client-scheduler";
import type { DelayedEmitDelivererInput } from "#config/shared-names";
import type { Clock } from "#core/ports/clock";
import type { DelayedEmit, DelayedEmitStore } from "#core/ports/delayed-emits";
import type { Logger } from "#core/ports/logger";
import { sha256Hex } from "#core/sha256";
import { hasErrorName } from "./sdk-errors.ts";

/** Schedule requests in flight at once for one run's delayed emits. */
const SCHEDULE_CONCURRENCY = 8;
/** Scheduler's schedule names: 1 to 64 of these characters. */
const SCHEDULE_NAME = /^[0-9A-Za-z_.-]{1,64}$/;

export interface SchedulerDelayedEmitsOptions {
  readonly rows: DelayedEmitStore;
  readonly scheduler: SchedulerClient;
  /**
   * The stack's schedule group (`SLUICE_SCHEDULE_GROUP`), shared with the timers: needed to schedule
   * and to delete schedules. Absent on a function that only reads and forgets rows (the deliverer).
   */
  readonly groupName?: string;
  /**
   * What schedules invoke: the deliverer's ARN (`SLUICE_DELAYED_EMIT_DELIVERER_ARN`) and the role
   * Scheduler assumes (`SLUICE_SCHEDULER_ROLE_ARN`). Absent on a function that only cancels.
   */
  readonly target?: { readonly delivererArn: string; readonly roleArn: string };
  readonly clock: Clock;
  readonly log: Logger;
}

/** The schedule of one delayed emit: `de-<source id>-<$in id>`, or a digest of both if that is no valid name. */
export function delayedEmitScheduleName(sourceId: string, inEventId: string): string {
  return scheduleName("de", `${sourceId}-${inEventId}`, `${sourceId}/${inEventId}`);
}

/**
 * `<prefix>-<readable>` when that is a valid schedule name, else `<prefix>-` and 40 hex digits of
 * `digestOf`'s SHA-256: the one naming rule of the schedules a row keeps (delayed emits, pauses).
 */
export function scheduleName(prefix: string, readable: string, digestOf: string): string {
  const name = `${prefix}-${readable}`;
  return SCHEDULE_NAME.test(name) ? name : `${prefix}-${sha256Hex(digestOf).slice(0, 40)}`;
}

/**
 * Scheduler's one-time expression for `ms`, in UTC to the second: rounded up, so it never fires
 * early, and never earlier than a second from `nowMs` (a run that took long to apply may pass a
 * near `delivery_ts`; Sluice does not depend on how Scheduler treats an `at()` in the past).
 */
export function atExpression(ms: number, nowMs: number): string {
  const second = Math.ceil(Math.max(ms, nowMs + 1000) / 1000) * 1000;
  return `at(${new Date(second).toISOString().slice(0, 19)})`;
}

export class SchedulerDelayedEmits implements DelayedEmitStore {
  readonly #options: SchedulerDelayedEmitsOptions;

  constructor(options: SchedulerDelayedEmitsOptions) {
    this.#options = options;
  }

  /** The request that makes one delayed emit's schedule. */
  scheduleRequest(entry: DelayedEmit): CreateScheduleCommandInput {
    const target = this.#target();
    const input: DelayedEmitDelivererInput = { sourceId: entry.sourceId, inEventId: entry.inEventId };
    return {
      Name: delayedEmitScheduleName(entry.sourceId, entry.inEventId),
      GroupName: target.groupName,
      ScheduleExpression: atExpression(entry.dueMs, this.#options.clock.nowMs()),
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      State: "ENABLED",
      // One-time: Scheduler deletes it after it invoked the deliverer, so none is left behind.
      ActionAfterCompletion: "DELETE",
      Description: `Sluice delayed emit ${entry.inEventId} of ${entry.sourceId}`,
      Target: {
        Arn: target.delivererArn,
        RoleArn: target.roleArn,
        Input: JSON.stringify(input),
        // Unlike a timer's tick, a delayed emit has no next one: Scheduler's own defaults (a day,
        // 185 tries) for handing it to Lambda.
        RetryPolicy: { MaximumEventAgeInSeconds: 86_400, MaximumRetryAttempts: 185 },
      },
    };
  }

  /**
   * Rows first, then schedules: a schedule never fires for a row that was not written. The row of
   * an emit whose schedule could not be made is removed again (it would never be delivered, yet
   * count against the source's bound), and the first such failure is thrown.
   */
  async add(entries: readonly DelayedEmit[]): Promise<void> {
    if (entries.length === 0) return;
    this.#target();
    await this.#options.rows.add(entries);
    await eachLimited(entries, SCHEDULE_CONCURRENCY, async (entry) => {
      try {
        await this.#options.scheduler.send(new CreateScheduleCommand(this.scheduleRequest(entry)));
      } catch (error) {
        // A run applied again (a retried job) schedules the same `$in` id: it is there already.
        if (hasErrorName(error, "ConflictException")) return;
        await this.#options.rows.remove(entry.sourceId, entry.inEventId);
        throw error;
      }
    });
  }

  countPending(sourceId: string): Promise<number> {
    return this.#options.rows.countPending(sourceId);
  }

  get(sourceId: string, inEventId: string): Promise<DelayedEmit | undefined> {
    return this.#options.rows.get(sourceId, inEventId);
  }

  /** Delivered: its schedule fired and Scheduler deletes it, so only the row goes. */
  remove(sourceId: string, inEventId: string): Promise<void> {
    return this.#options.rows.remove(sourceId, inEventId);
  }

  async removeRange(sourceId: string, fromId?: string, toId?: string): Promise<string[]> {
    const removed = await this.#options.rows.removeRange(sourceId, fromId, toId);
    await deleteSchedulesQuietly(
      this.#options,
      removed.map((inEventId) => delayedEmitScheduleName(sourceId, inEventId)),
      { one: "schedule of a cancelled delayed emit", all: "schedules of cancelled delayed emits" },
      { source_id: sourceId },
    );
    return removed;
  }

  #target() {
    const { target, groupName } = this.#options;
    if (!target || groupName === undefined) {
      throw new Error("delayed emits cannot be scheduled here: this function was deployed without the deliverer's ARN");
    }
    return { ...target, groupName };
  }
}

/**
 * Deletes one-time schedules, 8 at a time, of what the rows no longer hold (the rows decide): one
 * gone already (it fired, and Scheduler deleted it) is fine, and any other failure is logged, not
 * thrown, leaving a schedule that fires for nothing. A function given no schedule group deletes
 * none and warns once. Shared by delayed emits and paused runs.
 */
export async function deleteSchedulesQuietly(
  options: { readonly scheduler: SchedulerClient; readonly groupName?: string; readonly log: Logger },
  names: readonly string[],
  what: { one: string; all: string },
  fields: Record<string, unknown> = {},
): Promise<void> {
  if (names.length === 0) return;
  const { scheduler, groupName, log } = options;
  if (groupName === undefined) {
    log.warn(`${what.all} not deleted: this function has no schedule group`, { ...fields, forgotten: names.length });
    return;
  }
  await eachLimited(names, SCHEDULE_CONCURRENCY, async (Name) => {
    try {
      await scheduler.send(new DeleteScheduleCommand({ Name, GroupName: groupName }));
    } catch (error) {
      if (!hasErrorName(error, "ResourceNotFoundException")) {
        log.warn(`${what.one} not deleted`, { schedule: Name, error: String(error) });
      }
    }
  });
}

/** `work` on every item, at most `limit` at a time; rejects with the first failure once all settled. */
export async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item).catch((error: unknown) => void failures.push(error));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failures.length > 0) throw failures[0];
}
