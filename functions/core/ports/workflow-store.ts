import type { Json, TimerSpec } from "#core/component-model";
import { conflict } from "#core/errors";
import type { Page, PageQuery } from "#core/pagination";
import type { WorkflowRecord } from "#core/workflow-model";

/** An active workflow's timer trigger, as the timers need it. */
export interface ActiveTimerTrigger {
  workflowId: string;
  /** `ti_`. */
  timerId: string;
  spec: TimerSpec;
}

/** The `$.service.db` of one step, versioned for optimistic concurrency. */
export interface StepState {
  db: Record<string, Json>;
  /** The number of writes so far; a step with no stored state has version 0 (and is absent from reads). */
  version: number;
}

/** One step's state to write, based on the version read. */
export interface StepStateWrite {
  stepId: string;
  db: Record<string, Json>;
  /** The version the write is based on: 0 when none is stored yet. */
  expectedVersion: number;
}

/**
 * What tells one stored version of a workflow from the next: every write sets `updatedAt`, and
 * every write of its steps or triggers a new `deploymentId`.
 */
export type WorkflowVersion = Pick<WorkflowRecord, "updatedAt" | "deploymentId">;

/** Whether `stored` is still the version `expected` names. */
export const isVersion = (stored: WorkflowVersion, expected: WorkflowVersion) =>
  stored.updatedAt === expected.updatedAt && stored.deploymentId === expected.deploymentId;

/** The `conflict` of an update whose `expected` version was overwritten meanwhile. */
export const changedMeanwhile = (id: string) =>
  conflict(`workflow ${id} was changed by another request meanwhile; send this one again`);

/**
 * Workflows (`p_`), the lookups their triggers need, and their steps' states. Adapters:
 * `SqliteWorkflowStore` (and, from step 2 of the design, a DynamoDB one); they pass
 * `test/contract/workflow-store.contract.ts`.
 *
 * Guards: an HTTP trigger's `key` names one workflow among all, and an `externalId` one workflow
 * of its workspace. A write that would give either to a second workflow is refused as a conflict
 * and changes nothing. The timers of an active workflow are listed by {@link listActiveTimerTriggers}:
 * every write moves keys, external id and timers with the record, so none is ever seen apart.
 */
export interface WorkflowStore {
  /** Saves a new workflow. Throws `conflict` when its id, an HTTP trigger's key or its external id is taken. */
  createWorkflow(workflow: WorkflowRecord): Promise<void>;
  /**
   * Replaces a workflow; keys, external id and active timers follow the new record (those it no
   * longer has are freed). Concurrent updates are applied one after the other (the last one wins
   * whole). Throws `not_found` when it does not exist, `conflict` when a key or the external id
   * belongs to another workflow. With `expected` (the record the caller read), also `conflict`
   * when the stored record is no longer that one: another write came between the read and this.
   */
  updateWorkflow(workflow: WorkflowRecord, expected?: WorkflowVersion): Promise<void>;
  /** Removes a workflow with its keys, external id, timers and step states. Removing a missing one succeeds. */
  deleteWorkflow(id: string): Promise<void>;
  getWorkflow(id: string): Promise<WorkflowRecord | undefined>;
  /** The workflow with an HTTP trigger of this key (active or not: the caller checks). */
  findWorkflowByHttpKey(key: string): Promise<WorkflowRecord | undefined>;
  findWorkflowByExternalId(workspaceId: string, externalId: string): Promise<WorkflowRecord | undefined>;
  /** Workflows a user created, newest first by id (`slicePage` semantics). */
  listWorkflowsOfUser(userId: string, page: PageQuery): Promise<Page<WorkflowRecord>>;
  /** Workflows of a workspace, newest first by id (`slicePage` semantics). */
  listWorkflowsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<WorkflowRecord>>;
  /** The timer triggers of every active workflow, by timer id (local mode schedules them at start). */
  listActiveTimerTriggers(): Promise<ActiveTimerTrigger[]>;
  /** The stored states of a workflow's steps, by step id; steps with none are absent. */
  getStepStates(workflowId: string): Promise<Record<string, StepState>>;
  /**
   * Writes steps' states, all or none: each is stored as `expectedVersion + 1` when its stored
   * version is still `expectedVersion` (0: none stored). Throws `conflict`, writing nothing, when
   * any of them changed meanwhile. States of steps not named are left as they are.
   */
  putStepStates(workflowId: string, writes: StepStateWrite[]): Promise<void>;
}
