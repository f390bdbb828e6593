import { type DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { conflict, DomainError, notFound } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import {
  type ActiveTimerTrigger,
  changedMeanwhile,
  isVersion,
  type StepState,
  type StepStateWrite,
  type WorkflowStore,
  type WorkflowVersion,
} from "#core/ports/workflow-store";
import type { WorkflowRecord } from "#core/workflow-model";
import { failedConditionIndexes, isTransactionConflict } from "./dynamodb-errors.ts";
import { collectionQuery, deleteAllMatching, type Item, newestFirstPage, queryAll } from "./dynamodb-paging.ts";
import {
  type Key,
  lostToConcurrentWriter,
  pauseBeforeRetry,
  type TransactItem,
  transactDelete,
  transactPut,
  transactWrite,
} from "./dynamodb-transactions.ts";
import {
  MAX_STORED_STEP_STATE_BYTES,
  MAX_STORED_WORKFLOW_BYTES,
  MAX_WORKFLOW_TRANSACTION_BYTES,
  WORKFLOW_SORT_KEY_PREFIX,
  withinKeyLimits,
  workflowKeys,
} from "./workflow-keys.ts";

/** The record's attributes as stored on every copy: steps and triggers as JSON strings, no undefined values. */
function recordAttributes(workflow: WorkflowRecord): Item {
  const attributes: Item = {
    id: workflow.id,
    userId: workflow.userId,
    workspaceId: workflow.workspaceId,
    projectId: workflow.projectId,
    name: workflow.name,
    active: workflow.active,
    deploymentId: workflow.deploymentId,
    steps: JSON.stringify(workflow.steps),
    triggers: JSON.stringify(workflow.triggers),
    createdAt: workflow.createdAt,
    updatedAt: workflow.updatedAt,
  };
  if (workflow.externalId !== undefined) attributes.externalId = workflow.externalId;
  if (workflow.requestHash !== undefined) attributes.requestHash = workflow.requestHash;
  return attributes;
}

function fromItem(item: Item): WorkflowRecord {
  const workflow: WorkflowRecord = {
    id: String(item.id),
    userId: String(item.userId),
    workspaceId: String(item.workspaceId),
    projectId: String(item.projectId),
    name: String(item.name),
    active: item.active === true,
    deploymentId: String(item.deploymentId),
    steps: JSON.parse(String(item.steps)),
    triggers: JSON.parse(String(item.triggers)),
    createdAt: Number(item.createdAt),
    updatedAt: Number(item.updatedAt),
  };
  if (typeof item.externalId === "string") workflow.externalId = item.externalId;
  if (typeof item.requestHash === "string") workflow.requestHash = item.requestHash;
  return workflow;
}

/** What an item derived from the record is, for its write condition and for naming a failed one. */
type DerivedKind = "copy" | "endpoint" | "externalId";

interface Derived {
  kind: DerivedKind;
  item: Item;
}

const keyOf = (item: Item): Key => ({ pk: String(item.pk), sk: String(item.sk) });
const sameKey = (a: Key, b: Key) => a.pk === b.pk && a.sk === b.sk;
const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8");

function tooLarge(message: string): DomainError {
  return new DomainError("payload_too_large", message);
}

/**
 * Refuses, before anything is sent, a record over its item limit and a write whose copies would
 * make the transaction exceed DynamoDB's 4 MB (core caps a workflow's configuration below both).
 */
function checkSizes(workflow: WorkflowRecord, items: Item[]): void {
  const size = bytesOf(workflow);
  if (size > MAX_STORED_WORKFLOW_BYTES) {
    throw tooLarge(`the workflow is too large to store: ${size} bytes, at most ${MAX_STORED_WORKFLOW_BYTES}`);
  }
  const total = items.reduce((sum, item) => sum + bytesOf(item), 0);
  if (total > MAX_WORKFLOW_TRANSACTION_BYTES) {
    throw tooLarge(
      `the workflow's ${items.length} items (record, copies and guards) are too large to write in one transaction: ${total} bytes, at most ${MAX_WORKFLOW_TRANSACTION_BYTES}`,
    );
  }
}

/** What DynamoDB would refuse in a write of `items`, refused before anything is sent. */
function refuseUnwritable(workflow: WorkflowRecord, items: Item[]): void {
  checkSizes(workflow, items);
  // Two items of one write with the same key: two HTTP triggers sharing a key.
  const seen = new Set<string>();
  for (const item of items) {
    const key = `${String(item.pk)}\u0000${String(item.sk)}`;
    if (seen.has(key)) throw conflict(`two triggers of the workflow share the key ${String(item.pk)}`);
    seen.add(key);
  }
}

/**
 * The conflict a cancelled write of the record and `derived` (in that order) means when one of
 * its guards failed; undefined when none did.
 */
function guardConflict(error: unknown, workflow: WorkflowRecord, derived: Derived[]): DomainError | undefined {
  const failedKinds = failedConditionIndexes(error).map((index) => derived[index - 1]?.kind);
  if (failedKinds.includes("endpoint")) return conflict("an HTTP trigger's key is in use already");
  if (failedKinds.includes("externalId")) {
    return conflict(`external_id ${workflow.externalId} names another workflow of this workspace`);
  }
  return undefined;
}

/**
 * `WorkflowStore` on the DynamoDB resources table (docs/table-design.md, "Workflows"), built as
 * `DynamoDbSourceStore`: a workflow is one record item plus copies that serve each lookup with a
 * single request (its user's and its workspace's lists, each HTTP trigger's key, which doubles as
 * the key's guard), a guard of its external id and one item per timer of an active workflow. All
 * of them are written in one transaction conditioned on the record's internal `rev`, retried on a
 * fresh read when a concurrent writer got there first. Step states are items of the workflow's
 * partition, each versioned; a write of several is one transaction, so all or none.
 */
export class DynamoDbWorkflowStore implements WorkflowStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async createWorkflow(workflow: WorkflowRecord): Promise<void> {
    const attributes = recordAttributes(workflow);
    const derived = this.derived(workflow, attributes);
    const items = [
      { ...workflowKeys.workflow(workflow.id), type: "workflow", rev: 1, ...attributes },
      ...derived.map((d) => d.item),
    ];
    refuseUnwritable(workflow, items);
    const writes = items.map((item) => this.put(item, "attribute_not_exists(pk)"));
    for (let attempt = 1; ; attempt++) {
      try {
        await transactWrite(this.client, writes);
        return;
      } catch (error) {
        const guard = guardConflict(error, workflow, derived);
        if (guard) throw guard;
        // Any other failed condition is an existing id (the record or one of its copies).
        if (failedConditionIndexes(error).length > 0) throw conflict(`workflow ${workflow.id} exists already`);
        if (!(await pauseBeforeRetry(isTransactionConflict(error), attempt))) throw error;
      }
    }
  }

  async updateWorkflow(workflow: WorkflowRecord, expected?: WorkflowVersion): Promise<void> {
    const attributes = recordAttributes(workflow);
    const derived = this.derived(workflow, attributes);
    const record = { ...workflowKeys.workflow(workflow.id), type: "workflow", ...attributes };
    refuseUnwritable(workflow, [record, ...derived.map((d) => d.item)]);
    for (let attempt = 1; ; attempt++) {
      const stored = await this.getRecordItem(workflow.id);
      if (!stored) throw notFound(`workflow ${workflow.id}`);
      // Checked on each read: the write is conditioned on this read's `rev`, so one that came
      // between the caller's read and this write is seen here, on this or the retry's read.
      if (expected && !isVersion(fromItem(stored), expected)) throw changedMeanwhile(workflow.id);
      const writes: TransactItem[] = [
        this.put({ ...record, rev: Number(stored.rev) + 1 }, "rev = :rev", { ":rev": stored.rev }),
      ];
      for (const { kind, item } of derived) {
        // A key or external id may already be this workflow's; only another workflow's is a conflict.
        if (kind === "endpoint") {
          writes.push(this.put(item, "attribute_not_exists(pk) OR id = :id", { ":id": workflow.id }));
        } else if (kind === "externalId") {
          writes.push(this.put(item, "attribute_not_exists(pk) OR workflowId = :id", { ":id": workflow.id }));
        } else {
          writes.push(this.put(item));
        }
      }
      // What the workflow held before and no longer holds goes in the same write.
      const newKeys = derived.map((d) => keyOf(d.item));
      for (const { item } of this.derived(fromItem(stored), {})) {
        const key = keyOf(item);
        if (!newKeys.some((newKey) => sameKey(newKey, key))) writes.push(this.delete(key));
      }
      try {
        await transactWrite(this.client, writes);
        return;
      } catch (error) {
        const guard = guardConflict(error, workflow, derived);
        if (guard) throw guard;
        if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
  }

  async deleteWorkflow(id: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const stored = await this.getRecordItem(id);
      if (!stored) break;
      const writes = [
        this.delete(workflowKeys.workflow(id), "rev = :rev", { ":rev": stored.rev }),
        ...this.derived(fromItem(stored), {}).map(({ item }) => this.delete(keyOf(item))),
      ];
      try {
        await transactWrite(this.client, writes);
        break;
      } catch (error) {
        if (!(await pauseBeforeRetry(lostToConcurrentWriter(error), attempt))) throw error;
      }
    }
    // States can outlive their record (a crash between the two, a state written while the workflow
    // was deleted): they are deleted after it, and again by any later delete of the same id.
    const { pk } = workflowKeys.stepState(id, "");
    await deleteAllMatching(this.client, this.tableName, {
      ...collectionQuery(this.tableName, pk, WORKFLOW_SORT_KEY_PREFIX.stepState),
      ProjectionExpression: "pk, sk",
    });
  }

  async getWorkflow(id: string): Promise<WorkflowRecord | undefined> {
    const item = await this.getRecordItem(id);
    return item && fromItem(item);
  }

  // Strongly consistent although it is the hot path of HTTP triggers: a workflow is often called
  // right after it was deployed or changed, and a stale copy would run the old steps.
  async findWorkflowByHttpKey(key: string): Promise<WorkflowRecord | undefined> {
    const item = await this.getItem(workflowKeys.workflowEndpoint(key));
    return item && fromItem(item);
  }

  async findWorkflowByExternalId(workspaceId: string, externalId: string): Promise<WorkflowRecord | undefined> {
    const guard = await this.getItem(workflowKeys.workflowExternalId(workspaceId, externalId));
    if (!guard) return undefined;
    const workflow = await this.getWorkflow(String(guard.workflowId));
    // Between the two reads the workflow may have been deleted or have dropped the id.
    const same = workflow?.workspaceId === workspaceId && workflow.externalId === externalId;
    return same ? workflow : undefined;
  }

  async listWorkflowsOfUser(userId: string, page: PageQuery): Promise<Page<WorkflowRecord>> {
    return this.page(workflowKeys.workflowOfUser(userId, "").pk, page);
  }

  async listWorkflowsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<WorkflowRecord>> {
    return this.page(workflowKeys.workflowOfWorkspace(workspaceId, "").pk, page);
  }

  async listActiveTimerTriggers(): Promise<ActiveTimerTrigger[]> {
    const { pk } = workflowKeys.activeWorkflowTimer("");
    const items = await queryAll(this.client, collectionQuery(this.tableName, pk, WORKFLOW_SORT_KEY_PREFIX.timer));
    return items.map((item) => ({
      workflowId: String(item.workflowId),
      timerId: String(item.timerId),
      spec: item.spec as ActiveTimerTrigger["spec"],
    }));
  }

  async getStepStates(workflowId: string): Promise<Record<string, StepState>> {
    const { pk } = workflowKeys.stepState(workflowId, "");
    const items = await queryAll(this.client, collectionQuery(this.tableName, pk, WORKFLOW_SORT_KEY_PREFIX.stepState));
    const states: Record<string, StepState> = {};
    for (const item of items) {
      states[String(item.stepId)] = { db: JSON.parse(String(item.db)), version: Number(item.version) };
    }
    return states;
  }

  async putStepStates(workflowId: string, writes: StepStateWrite[]): Promise<void> {
    if (writes.length === 0) return;
    const items = writes.map(({ stepId, db, expectedVersion }) => {
      const json = JSON.stringify(db);
      const size = Buffer.byteLength(json, "utf8");
      if (size > MAX_STORED_STEP_STATE_BYTES) {
        throw tooLarge(
          `the state of step ${stepId} is too large to store: ${size} bytes, at most ${MAX_STORED_STEP_STATE_BYTES}`,
        );
      }
      const item = {
        ...workflowKeys.stepState(workflowId, stepId),
        type: "stepState",
        workflowId,
        stepId,
        db: json,
        version: expectedVersion + 1,
      };
      return expectedVersion === 0
        ? this.put(item, "attribute_not_exists(pk)")
        : this.put(item, "version = :expected", { ":expected": expectedVersion });
    });
    // One step written twice in one call cannot both hold; DynamoDB would refuse the request.
    if (new Set(writes.map((w) => w.stepId)).size < writes.length) {
      throw conflict("a step's state is written twice in one write");
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await transactWrite(this.client, items);
        return;
      } catch (error) {
        const failed = failedConditionIndexes(error);
        if (failed.length > 0) {
          const stepIds = failed.map((index) => writes[index]?.stepId).join(", ");
          throw conflict(`the state of step ${stepIds} was changed by another run`);
        }
        // Another transaction held an item: try again, and its commit (if any) then fails the condition.
        if (!(await pauseBeforeRetry(isTransactionConflict(error), attempt))) throw error;
      }
    }
  }

  /** The items derived from a workflow, after its record: copies, guards and active timers. */
  private derived(workflow: WorkflowRecord, attributes: Item): Derived[] {
    const derived: Derived[] = [
      {
        kind: "copy",
        item: {
          ...workflowKeys.workflowOfUser(workflow.userId, workflow.id),
          type: "workflowOfUser",
          ...attributes,
        },
      },
      {
        kind: "copy",
        item: {
          ...workflowKeys.workflowOfWorkspace(workflow.workspaceId, workflow.id),
          type: "workflowOfWorkspace",
          ...attributes,
        },
      },
    ];
    if (workflow.externalId !== undefined) {
      const guard: Item = {
        ...workflowKeys.workflowExternalId(workflow.workspaceId, workflow.externalId),
        type: "workflowExternalId",
        workflowId: workflow.id,
      };
      if (workflow.requestHash !== undefined) guard.requestHash = workflow.requestHash;
      derived.push({ kind: "externalId", item: guard });
    }
    for (const trigger of workflow.triggers) {
      if (trigger.type === "http") {
        derived.push({
          kind: "endpoint",
          item: {
            ...workflowKeys.workflowEndpoint(trigger.key),
            type: "workflowEndpoint",
            ...attributes,
            triggerId: trigger.id,
          },
        });
      } else if (trigger.type === "timer" && workflow.active) {
        derived.push({
          kind: "copy",
          item: {
            ...workflowKeys.activeWorkflowTimer(trigger.id),
            type: "activeWorkflowTimer",
            workflowId: workflow.id,
            timerId: trigger.id,
            spec: trigger.spec,
          },
        });
      }
    }
    return derived;
  }

  private put(Item: Item, condition?: string, values?: Item): TransactItem {
    return transactPut(this.tableName, Item, condition, values);
  }

  private delete(Key: Key, condition?: string, values?: Item): TransactItem {
    return transactDelete(this.tableName, Key, condition, values);
  }

  private getRecordItem(id: string): Promise<Item | undefined> {
    return this.getItem(workflowKeys.workflow(id));
  }

  private async getItem(Key: Key): Promise<Item | undefined> {
    if (!withinKeyLimits(Key)) return undefined;
    const { Item } = await this.client.send(new GetCommand({ TableName: this.tableName, Key, ConsistentRead: true }));
    return Item;
  }

  /** One page of a collection of workflow copies, newest first (docs/table-design.md, "Pagination"). */
  private async page(pk: string, page: PageQuery): Promise<Page<WorkflowRecord>> {
    const prefix = WORKFLOW_SORT_KEY_PREFIX.workflow;
    const { items, totalCount } = await newestFirstPage(this.client, this.tableName, pk, prefix, page);
    return { items: items.map(fromItem), totalCount };
  }
}
