import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from "@aws-sdk/lib-dynamodb";
import { RESOURCES_TABLE } from "#config/shared-names";
import { DomainError } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import { type Clock, systemClock } from "#core/ports/clock";
import { DEFAULT_EVENT_RETENTION, type EventRetention } from "#core/ports/event-store";
import type { BeginRunResult, WorkflowRunStore } from "#core/ports/workflow-run-store";
import type { RunLogRecord, WorkflowRun } from "#core/workflow-model";
import { isConditionalCheckFailed } from "./dynamodb-errors.ts";
import { collectionQuery, deleteAllMatching, type Item, newestFirstPage, type QueryFilter } from "./dynamodb-paging.ts";
import { MAX_STORED_RUN_BYTES, WORKFLOW_SORT_KEY_PREFIX, withinKeyLimits, workflowKeys } from "./workflow-keys.ts";

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8");

/** Characters an error message or exit reason keeps when even a run without logs is too large. */
const CUT_TEXT_CHARS = 1024;

/**
 * `run` as it can be stored in `maxBytes` of JSON (design 2.4: a run record at 64 KB, logs cut
 * first). The newest log lines go first, replaced by one line saying how many went; if the run is
 * still too large without any, its error message and exit reason are cut and step summaries
 * dropped. Core bounds what a run may carry well below this, so this is a safety net; a run still
 * too large after both is refused with `payload_too_large`.
 */
export function fitRunRecord(run: WorkflowRun, maxBytes = MAX_STORED_RUN_BYTES): WorkflowRun {
  if (bytesOf(run) <= maxBytes) return run;
  const withoutLogs = { ...run, logs: [] };
  const last = run.logs[run.logs.length - 1];
  const note = (cut: number): RunLogRecord => ({
    ts: last?.ts ?? run.startedAt,
    level: "warn",
    message: `${cut} log lines were cut to keep the run record under ${maxBytes} bytes`,
    step: last?.step ?? "",
  });
  // Each kept line adds its JSON and a comma; the note's size is taken at its longest count.
  let size = bytesOf(withoutLogs) + bytesOf(note(run.logs.length)) + 1;
  let kept = 0;
  while (kept < run.logs.length) {
    const next = bytesOf(run.logs[kept]) + 1;
    if (size + next > maxBytes) break;
    size += next;
    kept++;
  }
  if (size <= maxBytes) return { ...run, logs: [...run.logs.slice(0, kept), note(run.logs.length - kept)] };

  const cut: WorkflowRun = {
    ...withoutLogs,
    steps: run.steps.map(({ summary: _summary, ...step }) => step),
  };
  if (run.error) cut.error = { ...run.error, message: run.error.message.slice(0, CUT_TEXT_CHARS) };
  if (run.exitReason !== undefined) cut.exitReason = run.exitReason.slice(0, CUT_TEXT_CHARS);
  const cutSize = bytesOf(cut);
  if (cutSize > maxBytes) {
    throw new DomainError(
      "payload_too_large",
      `run ${run.id} is too large to store: ${cutSize} bytes without its logs, at most ${maxBytes}`,
    );
  }
  return cut;
}

/** The run as stored in `record`: `attempts` is an attribute of its own, counted by `beginRun`. */
const encodeRecord = (run: WorkflowRun) => JSON.stringify({ ...run, attempts: undefined });

function fromItem(item: Item): WorkflowRun {
  return { ...(JSON.parse(String(item.record)) as WorkflowRun), attempts: Number(item.attempts) };
}

/**
 * What a `beginRun` whose condition failed found, from the item DynamoDB returns with the failure
 * (`ALL_OLD`, in DynamoDB's wire format: the document client does not unmarshal it).
 */
function foundOnFailure(error: unknown): { status?: string; leaseUntilMs: number } | undefined {
  const item = (error as { Item?: Record<string, { S?: string; N?: string }> }).Item;
  if (!item) return undefined;
  return { status: item.status?.S, leaseUntilMs: Number(item.leaseUntilMs?.N) };
}

export interface DynamoDbWorkflowRunStoreOptions {
  /**
   * `maxAgeMs` sets `expiresAt` (epoch seconds, from the run's start) on every run, which the
   * table's TTL deletes and reads skip, as for events; `keepPerChannel` is not enforced on AWS.
   * @default DEFAULT_EVENT_RETENTION
   */
  retention?: EventRetention;
  /** The time reads compare `expiresAt` with. @default systemClock */
  clock?: Clock;
}

/**
 * `WorkflowRunStore` on the DynamoDB resources table (docs/table-design.md, "Workflows"): one item
 * per run in its workflow's partition `WFRUN#<p_>`, with `status`, `leaseUntilMs` and `attempts`
 * as attributes for the conditions and the record as a JSON string. `beginRun` is one conditional
 * `UpdateItem`: it counts `attempts` in the same request and, when its condition fails, the item
 * it found (`ALL_OLD`) tells `done` from `busy` without a read. `finishRun` is a `PutItem`
 * conditioned on the same attempt still running.
 */
export class DynamoDbWorkflowRunStore implements WorkflowRunStore {
  private readonly maxAgeMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    options: DynamoDbWorkflowRunStoreOptions = {},
  ) {
    this.maxAgeMs = (options.retention ?? DEFAULT_EVENT_RETENTION).maxAgeMs;
    this.clock = options.clock ?? systemClock;
  }

  async beginRun(run: WorkflowRun, nowMs: number): Promise<BeginRunResult> {
    const begun = fitRunRecord({ ...run, status: "running" });
    const key = workflowKeys.workflowRun(run.workflowId, run.id);
    const expiry = this.expiresAt(begun);
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: key,
          UpdateExpression:
            "SET #type = :type, workflowId = :workflowId, id = :id, #status = :running, leaseUntilMs = :lease, " +
            "startedAt = :startedAt, #record = :record, attempts = if_not_exists(attempts, :zero) + :one" +
            (expiry === undefined ? "" : ", #ttl = :expiresAt"),
          // Absent, or running on a lease that ended: the lease holds up to and including leaseUntilMs.
          ConditionExpression: "attribute_not_exists(pk) OR (#status = :running AND leaseUntilMs < :now)",
          ExpressionAttributeNames: {
            "#type": "type",
            "#status": "status",
            "#record": "record",
            ...(expiry === undefined ? {} : { "#ttl": RESOURCES_TABLE.timeToLiveAttribute }),
          },
          ExpressionAttributeValues: {
            ":type": "workflowRun",
            ":workflowId": begun.workflowId,
            ":id": begun.id,
            ":running": "running",
            ":lease": begun.leaseUntilMs,
            ":startedAt": begun.startedAt,
            ":record": encodeRecord(begun),
            ":zero": 0,
            ":one": 1,
            ":now": nowMs,
            ...(expiry === undefined ? {} : { ":expiresAt": expiry }),
          },
          ReturnValues: "UPDATED_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return { outcome: "started", run: { ...begun, attempts: Number(Attributes?.attempts) } };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      // The condition fails only on an existing item, which DynamoDB then returns.
      const found = foundOnFailure(error);
      if (!found) throw error;
      if (found.status !== "running") return { outcome: "done" };
      return { outcome: "busy", leaseUntilMs: Number(found.leaseUntilMs) };
    }
  }

  async finishRun(run: WorkflowRun): Promise<void> {
    const finished = fitRunRecord(run);
    try {
      await this.client.send(
        new PutCommand({
          TableName: this.tableName,
          Item: this.item(finished),
          // False on a missing item too: a run deleted meanwhile is not brought back.
          ConditionExpression: "#status = :running AND attempts = :attempts",
          ExpressionAttributeNames: { "#status": "status" },
          ExpressionAttributeValues: { ":running": "running", ":attempts": run.attempts },
        }),
      );
    } catch (error) {
      // Taken over, ended already or deleted: left as it is (decision 159).
      if (!isConditionalCheckFailed(error)) throw error;
    }
  }

  async getRun(workflowId: string, runId: string): Promise<WorkflowRun | undefined> {
    const item = await this.getItem(workflowKeys.workflowRun(workflowId, runId));
    if (!item || this.expired(item)) return undefined;
    return fromItem(item);
  }

  async listRuns(workflowId: string, page: PageQuery): Promise<Page<WorkflowRun>> {
    const { pk } = workflowKeys.workflowRun(workflowId, "");
    const { items, totalCount } = await newestFirstPage(
      this.client,
      this.tableName,
      pk,
      WORKFLOW_SORT_KEY_PREFIX.run,
      page,
      this.unexpiredFilter(),
    );
    return { items: items.map(fromItem), totalCount };
  }

  async deleteRuns(workflowId: string): Promise<void> {
    const { pk } = workflowKeys.workflowRun(workflowId, "");
    await deleteAllMatching(this.client, this.tableName, {
      ...collectionQuery(this.tableName, pk, WORKFLOW_SORT_KEY_PREFIX.run),
      ProjectionExpression: "pk, sk",
    });
  }

  private item(run: WorkflowRun): Item {
    const expiry = this.expiresAt(run);
    return {
      ...workflowKeys.workflowRun(run.workflowId, run.id),
      type: "workflowRun",
      workflowId: run.workflowId,
      id: run.id,
      status: run.status,
      leaseUntilMs: run.leaseUntilMs,
      startedAt: run.startedAt,
      attempts: run.attempts,
      record: encodeRecord(run),
      ...(expiry === undefined ? {} : { [RESOURCES_TABLE.timeToLiveAttribute]: expiry }),
    };
  }

  /** Epoch seconds the run expires at, counted from its start (as events from their id), or none. */
  private expiresAt(run: WorkflowRun): number | undefined {
    return this.maxAgeMs > 0 ? Math.ceil((run.startedAt + this.maxAgeMs) / 1000) : undefined;
  }

  /** TTL deletes expired items only within a few days, so reads skip them (as `DynamoDbEventStore`'s). */
  private unexpiredFilter(): QueryFilter | undefined {
    if (this.maxAgeMs <= 0) return undefined;
    return {
      FilterExpression: "attribute_not_exists(#ttl) OR #ttl > :now",
      ExpressionAttributeNames: { "#ttl": RESOURCES_TABLE.timeToLiveAttribute },
      ExpressionAttributeValues: { ":now": Math.floor(this.clock.nowMs() / 1000) },
    };
  }

  private expired(item: Item): boolean {
    const expiresAt = item[RESOURCES_TABLE.timeToLiveAttribute];
    return this.maxAgeMs > 0 && typeof expiresAt === "number" && expiresAt <= Math.floor(this.clock.nowMs() / 1000);
  }

  private async getItem(Key: { pk: string; sk: string }): Promise<Item | undefined> {
    if (!withinKeyLimits(Key)) return undefined;
    const { Item } = await this.client.send(new GetCommand({ TableName: this.tableName, Key, ConsistentRead: true }));
    return Item;
  }
}
