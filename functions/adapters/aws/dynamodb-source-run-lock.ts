import { randomUUID } from "node:crypto";
import { DeleteCommand, type DynamoDBDocumentClient, PutCommand } from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import type { Clock } from "#core/ports/clock";
import type { AcquireOptions, SourceRunLease, SourceRunLock } from "#core/ports/source-run-lock";
import { isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { sleep } from "./dynamodb-paging.ts";
import { resourceKeys } from "./table-design.ts";

export interface DynamoDbSourceRunLockOptions {
  clock: Clock;
  /**
   * The longest `acquire` waits when the caller gives no `waitUntilMs` (a queued run): the source
   * runner's Lambda must still have the run's time limit left afterwards.
   * @default 20000
   */
  maxWaitMs?: number;
  /** First pause between two tries while the source is held; it grows to {@link MAX_POLL_MS}. @default 20 */
  pollMs?: number;
}

const MAX_POLL_MS = 250;
/** An expired lease item is deleted by the table's TTL this long after it expired, if nothing released it. */
const TTL_AFTER_EXPIRY_S = 3600;

/**
 * `SourceRunLock` on the resources table: one lease item per held source (`SRC#<id>` / `RUNLOCK`)
 * holding a random token and the lease's end (`leaseUntilMs`). Acquiring is a conditional put that
 * succeeds when there is no item or its lease has ended; releasing deletes the item on the
 * condition that it still holds this lease's token, so a run whose lease expired never frees the
 * next run's. Waiters poll with a growing pause (20 ms to 250 ms, jittered): not in arrival order,
 * unlike the local lock, and each try is one conditional write. The lease's end compares the
 * clocks of different Lambda containers: leases are longer than runs by a margin of seconds
 * (`source-runs.ts`), far above their skew.
 */
export class DynamoDbSourceRunLock implements SourceRunLock {
  private readonly maxWaitMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly options: DynamoDbSourceRunLockOptions,
  ) {
    this.maxWaitMs = options.maxWaitMs ?? 20_000;
    this.pollMs = Math.max(1, options.pollMs ?? 20);
  }

  async acquire(sourceId: string, { leaseMs, waitUntilMs }: AcquireOptions): Promise<SourceRunLease | undefined> {
    const { clock } = this.options;
    const giveUpAt = waitUntilMs ?? clock.nowMs() + this.maxWaitMs;
    const token = randomUUID();
    let pause = this.pollMs;
    for (;;) {
      const now = clock.nowMs();
      const leaseUntilMs = now + leaseMs;
      if (await this.tryPut(sourceId, token, now, leaseUntilMs)) return this.lease(sourceId, token, leaseUntilMs);
      const left = giveUpAt - clock.nowMs();
      if (left <= 0) return undefined;
      // Full jitter, so waiters that collided once do not try again in step.
      await sleep(Math.min(left, Math.ceil(pause * (0.5 + Math.random() / 2))));
      pause = Math.min(MAX_POLL_MS, pause * 2);
    }
  }

  private async tryPut(sourceId: string, token: string, now: number, leaseUntilMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: {
            ...resourceKeys.sourceRunLock(sourceId),
            type: "sourceRunLock",
            token,
            leaseUntilMs,
            [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil(leaseUntilMs / 1000) + TTL_AFTER_EXPIRY_S,
          },
          ConditionExpression: "attribute_not_exists(pk) OR leaseUntilMs < :now",
          ExpressionAttributeValues: { ":now": now },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionalCheckFailed(error)) return false;
      throw error;
    }
  }

  private lease(sourceId: string, token: string, leaseUntilMs: number): SourceRunLease {
    let released = false;
    return {
      held: () => !released && this.options.clock.nowMs() < leaseUntilMs,
      release: async () => {
        if (released) return;
        released = true;
        try {
          await this.client.send(
            new DeleteCommand({
              TableName: this.tableName,
              Key: resourceKeys.sourceRunLock(sourceId),
              ConditionExpression: "#token = :token",
              ExpressionAttributeNames: { "#token": "token" },
              ExpressionAttributeValues: { ":token": token },
            }),
          );
        } catch (error) {
          // The lease expired and another run holds the source now: it is not this run's to free.
          if (!isConditionalCheckFailed(error)) throw error;
        }
      },
    };
  }
}
