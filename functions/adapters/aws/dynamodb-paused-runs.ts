/**
 * The rows of `PausedRunStore` on the DynamoDB resources table (docs/table-design.md "Paused
 * runs"): per pause its item `PAUSE#<run id>` (its record as JSON text, and its dispatch once one
 * took it) and a small index item `RUN#<run id>` in its workflow's partition `PAUSES#<workflow id>`.
 * A pause's URLs and its schedule name only the run, so the record is keyed by the run; counting
 * and forgetting a workflow's pauses (up to 10,000) read only the index items.
 *
 * A record is at most about 290 KB (the state a pause keeps is bounded to 256 KiB, the rest is
 * ids), and a dispatch adds the request to the resume or cancel URL (a body of at most 32 KiB, as
 * text and parsed): under DynamoDB's 400 KB item limit for any request a client sends in earnest.
 * Both items expire by TTL two weeks after the pause's time, so rows nothing removed do not stay.
 * `SchedulerPausedRuns` adds the schedules.
 */
import {
  BatchWriteCommand,
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  TransactWriteCommand,
  UpdateCommand,
} from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import type { PauseDispatch, PausedRun, PausedRunStore } from "#core/ports/paused-runs";
import { isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, countAll, type Item, queryAll, sendUntilProcessed } from "./dynamodb-paging.ts";
import { resourceKeys, SORT_KEY_PREFIX } from "./table-design.ts";

/**
 * How long past its time a pause's rows are kept for DynamoDB's TTL to remove, if nothing did: as
 * long as the failed-runs queue keeps a continuation that failed every try (14 days), so that one
 * replayed by hand still finds its pause.
 */
export const PAUSED_RUN_ROW_GRACE_MS = 14 * 24 * 60 * 60 * 1000;
const BATCH_WRITE_LIMIT = 25;
const BATCH_WRITE_ATTEMPTS = 8;
const INDEX = SORT_KEY_PREFIX.pausedRunOfWorkflow;

/** The pause an item holds: its record, and its dispatch if one took it. */
function pauseOf(item: Item): PausedRun {
  const pause = JSON.parse(String(item.record)) as PausedRun;
  if (typeof item.dispatch === "string") pause.dispatch = JSON.parse(item.dispatch) as PauseDispatch;
  return pause;
}

export class DynamoDbPausedRuns implements PausedRunStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  /**
   * Both items in one transaction: a pause is counted exactly when it is there. A put replaces
   * what a first try of the same run kept, its dispatch included (the item is written whole).
   */
  async add(pause: PausedRun): Promise<void> {
    const { dispatch: _ignored, ...waiting } = pause;
    const expiry = {
      [RESOURCES_TABLE.timeToLiveAttribute]: Math.ceil((pause.dueMs + PAUSED_RUN_ROW_GRACE_MS) / 1000),
    };
    await this.client.send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: this.tableName,
              Item: {
                ...resourceKeys.pausedRun(pause.id),
                workflowId: pause.workflowId,
                dueMs: pause.dueMs,
                record: JSON.stringify(waiting),
                ...expiry,
              },
            },
          },
          {
            Put: {
              TableName: this.tableName,
              Item: {
                ...resourceKeys.pausedRunOfWorkflow(pause.workflowId, pause.id),
                runId: pause.id,
                stateBytes: pause.stateBytes,
                ...expiry,
              },
            },
          },
        ],
      }),
    );
  }

  async get(id: string): Promise<PausedRun | undefined> {
    const out = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: resourceKeys.pausedRun(id), ConsistentRead: true }),
    );
    return out.Item ? pauseOf(out.Item) : undefined;
  }

  /**
   * One conditional write: it sets the dispatch only where there is a pause and none took it, so
   * of concurrent dispatches exactly one wins. A loser gets the item as it was from the same
   * request (`ReturnValuesOnConditionCheckFailure`), whose dispatch is the winner's.
   */
  async dispatch(id: string, dispatch: PauseDispatch): Promise<{ pause: PausedRun; won: boolean } | undefined> {
    try {
      const out = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: resourceKeys.pausedRun(id),
          UpdateExpression: "SET #dispatch = :dispatch",
          ConditionExpression: "attribute_exists(pk) AND attribute_not_exists(#dispatch)",
          ExpressionAttributeNames: { "#dispatch": "dispatch" },
          ExpressionAttributeValues: { ":dispatch": JSON.stringify(dispatch) },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return { pause: pauseOf(out.Attributes ?? {}), won: true };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      // The error carries the item in DynamoDB's own form (the document client does not convert
      // it); none when there is no pause.
      const stored = (error as { Item?: Record<string, { S?: string }> }).Item;
      if (!stored) return undefined;
      return { pause: pauseOf({ record: stored.record?.S, dispatch: stored.dispatch?.S }), won: false };
    }
  }

  /**
   * Deletes the record, returning what it held (its workflow names the index item's partition),
   * then the index item: of two removals at once, only the one that deleted the record says so.
   */
  async remove(id: string): Promise<boolean> {
    const out = await this.client.send(
      new DeleteCommand({ TableName: this.tableName, Key: resourceKeys.pausedRun(id), ReturnValues: "ALL_OLD" }),
    );
    const workflowId = out.Attributes?.workflowId;
    if (typeof workflowId !== "string") return false;
    await this.deleteRows(workflowId, [id]);
    return true;
  }

  /** Nothing: on AWS a pause's schedule, not a sweep, queues a lost continuation again. */
  async touch(_id: string, _atMs: number): Promise<void> {}

  async countPending(workflowId: string): Promise<number> {
    return countAll(this.client, collectionQuery(this.tableName, resourceKeys.pausedRunsOfWorkflow(workflowId), INDEX));
  }

  async removeWorkflow(workflowId: string): Promise<string[]> {
    const items = await queryAll(this.client, {
      ...collectionQuery(this.tableName, resourceKeys.pausedRunsOfWorkflow(workflowId), INDEX),
      ProjectionExpression: "runId",
    });
    const ids = items.map((item) => String(item.runId));
    await this.deleteRows(workflowId, ids);
    return ids;
  }

  /** Adds up the `stateBytes` the workflow's index items carry (every page). */
  async stateBytesOf(workflowId: string): Promise<number> {
    const items = await queryAll(this.client, {
      ...collectionQuery(this.tableName, resourceKeys.pausedRunsOfWorkflow(workflowId), INDEX),
      ProjectionExpression: "stateBytes",
    });
    return items.reduce((sum, item) => sum + (typeof item.stateBytes === "number" ? item.stateBytes : 0), 0);
  }

  /** Both items of each pause, 25 deletes per request (deleting what is gone is fine). */
  private async deleteRows(workflowId: string, runIds: readonly string[]): Promise<void> {
    const requests = runIds.flatMap((id) =>
      [resourceKeys.pausedRun(id), resourceKeys.pausedRunOfWorkflow(workflowId, id)].map((Key) => ({
        DeleteRequest: { Key },
      })),
    );
    for (let start = 0; start < requests.length; start += BATCH_WRITE_LIMIT) {
      const chunk = requests.slice(start, start + BATCH_WRITE_LIMIT);
      await sendUntilProcessed("BatchWriteItem", chunk, BATCH_WRITE_ATTEMPTS, async (pending) => {
        const out = await this.client.send(new BatchWriteCommand({ RequestItems: { [this.tableName]: pending } }));
        return (out.UnprocessedItems?.[this.tableName] ?? []) as typeof pending;
      });
    }
  }
}
