import { conflict, notFound } from "#core/errors";
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
import { type SqliteDatabase, violatedConstraint } from "./sqlite-database.ts";
import { pageStatements, readPage } from "./sqlite-paging.ts";
import { SqliteReadCache } from "./sqlite-read-cache.ts";

interface WorkflowRow {
  record: string;
}

const toWorkflow = (row: WorkflowRow): WorkflowRecord => JSON.parse(row.record) as WorkflowRecord;

/** Turns the constraint a write broke into the port's conflict; any other error is returned as it is. */
function asConflict(error: unknown, workflow: WorkflowRecord): unknown {
  const constraint = violatedConstraint(error);
  if (constraint?.includes("workflows.id")) return conflict(`workflow ${workflow.id} exists already`);
  if (constraint?.includes("workflow_endpoints.key")) return conflict("an HTTP trigger's key is in use already");
  if (constraint?.includes("workflows.external_id")) {
    return conflict(`external_id ${workflow.externalId} names another workflow of this workspace`);
  }
  return error;
}

/**
 * `WorkflowStore` on the local SQLite file. Each write is one IMMEDIATE transaction of the record
 * and the rows derived from it (endpoint keys, active timers), so they never disagree; the unique
 * indexes are the guards (a broken one is a conflict, and the transaction writes nothing).
 *
 * Workflows are cached by id and by endpoint key through `SqliteReadCache` (the HTTP trigger is
 * the hot path), and step states by workflow: emptied by every write of this store, except that a
 * state write drops only that workflow's states. Hits are shallow copies of a deeply frozen record:
 * callers must not change its `steps` or `triggers` in place.
 */
export class SqliteWorkflowStore implements WorkflowStore {
  private readonly statements;
  private readonly cache;
  private readonly byId;
  private readonly byHttpKey;
  /**
   * Keys known to name no workflow: every request to a source's endpoint asks this store first
   * (design W14), and a miss would otherwise be a query each time. Emptied with the rest of the
   * cache by any write of a workflow, here or in another process.
   */
  private readonly noWorkflowAtKey;
  private readonly statesById;
  private readonly write;
  private readonly putStates;

  constructor(
    private readonly db: SqliteDatabase,
    options: { cacheSize?: number } = {},
  ) {
    this.cache = new SqliteReadCache(db, options.cacheSize);
    this.byId = this.cache.map<WorkflowRecord>();
    this.byHttpKey = this.cache.map<WorkflowRecord>();
    this.noWorkflowAtKey = this.cache.map<true>();
    this.statesById = this.cache.map<Record<string, StepState>>();
    this.statements = {
      insert: db.prepare<[string, string, string, string | null, string]>(
        "INSERT INTO workflows (id, user_id, workspace_id, external_id, record) VALUES (?, ?, ?, ?, ?)",
      ),
      update: db.prepare<[string, string, string | null, string, string]>(
        "UPDATE workflows SET user_id = ?, workspace_id = ?, external_id = ?, record = ? WHERE id = ?",
      ),
      deleteWorkflow: db.prepare<[string]>("DELETE FROM workflows WHERE id = ?"),
      insertEndpoint: db.prepare<[string, string, string]>(
        "INSERT INTO workflow_endpoints (key, workflow_id, trigger_id) VALUES (?, ?, ?)",
      ),
      deleteEndpoints: db.prepare<[string]>("DELETE FROM workflow_endpoints WHERE workflow_id = ?"),
      insertTimer: db.prepare<[string, string, string]>(
        "INSERT INTO workflow_timers (timer_id, workflow_id, spec) VALUES (?, ?, ?)",
      ),
      deleteTimers: db.prepare<[string]>("DELETE FROM workflow_timers WHERE workflow_id = ?"),
      deleteStates: db.prepare<[string]>("DELETE FROM step_states WHERE workflow_id = ?"),
      byId: db.prepare<[string], WorkflowRow>("SELECT record FROM workflows WHERE id = ?"),
      byHttpKey: db.prepare<[string], WorkflowRow>(
        "SELECT w.record FROM workflow_endpoints e JOIN workflows w ON w.id = e.workflow_id WHERE e.key = ?",
      ),
      byExternalId: db.prepare<[string, string], WorkflowRow>(
        "SELECT record FROM workflows WHERE workspace_id = ? AND external_id = ?",
      ),
      activeTimers: db.prepare<[], { timer_id: string; workflow_id: string; spec: string }>(
        "SELECT timer_id, workflow_id, spec FROM workflow_timers ORDER BY timer_id",
      ),
      states: db.prepare<[string], { step_id: string; db: string; version: number }>(
        "SELECT step_id, db, version FROM step_states WHERE workflow_id = ?",
      ),
      insertState: db.prepare<[string, string, string]>(
        "INSERT INTO step_states (workflow_id, step_id, db, version) VALUES (?, ?, ?, 1) ON CONFLICT DO NOTHING",
      ),
      updateState: db.prepare<[string, number, string, string, number]>(
        "UPDATE step_states SET db = ?, version = ? WHERE workflow_id = ? AND step_id = ? AND version = ?",
      ),
      ofUser: pageStatements<WorkflowRow>(db, "workflows", "user_id"),
      ofWorkspace: pageStatements<WorkflowRow>(db, "workflows", "workspace_id"),
    };
    const s = this.statements;
    /** The record and its derived rows, the old ones of an update removed first. */
    this.write = db.transaction((workflow: WorkflowRecord, create: boolean, expected?: WorkflowVersion) => {
      const externalId = workflow.externalId ?? null;
      const record = JSON.stringify(workflow);
      if (create) {
        s.insert.run(workflow.id, workflow.userId, workflow.workspaceId, externalId, record);
      } else {
        const stored = s.byId.get(workflow.id);
        if (!stored) throw notFound(`workflow ${workflow.id}`);
        if (expected && !isVersion(toWorkflow(stored), expected)) throw changedMeanwhile(workflow.id);
        s.deleteEndpoints.run(workflow.id);
        s.deleteTimers.run(workflow.id);
        s.update.run(workflow.userId, workflow.workspaceId, externalId, record, workflow.id);
      }
      for (const trigger of workflow.triggers) {
        if (trigger.type === "http") s.insertEndpoint.run(trigger.key, workflow.id, trigger.id);
        if (trigger.type === "timer" && workflow.active) {
          s.insertTimer.run(trigger.id, workflow.id, JSON.stringify(trigger.spec));
        }
      }
    });
    this.putStates = db.transaction((workflowId: string, writes: StepStateWrite[]) => {
      for (const { stepId, db: state, expectedVersion } of writes) {
        const json = JSON.stringify(state);
        const { changes } =
          expectedVersion === 0
            ? s.insertState.run(workflowId, stepId, json)
            : s.updateState.run(json, expectedVersion + 1, workflowId, stepId, expectedVersion);
        // Throwing rolls back the writes of the steps before it: all or none.
        if (changes === 0) throw conflict(`the state of step ${stepId} was changed by another run`);
      }
    });
  }

  async createWorkflow(workflow: WorkflowRecord): Promise<void> {
    this.save(workflow, true);
  }

  async updateWorkflow(workflow: WorkflowRecord, expected?: WorkflowVersion): Promise<void> {
    this.save(workflow, false, expected);
  }

  async deleteWorkflow(id: string): Promise<void> {
    const s = this.statements;
    this.cache.clear();
    this.statesById.delete(id);
    this.db
      .transaction(() => {
        s.deleteEndpoints.run(id);
        s.deleteTimers.run(id);
        s.deleteStates.run(id);
        s.deleteWorkflow.run(id);
      })
      .immediate();
  }

  async getWorkflow(id: string): Promise<WorkflowRecord | undefined> {
    const hit = this.cache.get(this.byId, id);
    if (hit) return { ...hit };
    const row = this.statements.byId.get(id);
    return row && { ...this.remember(toWorkflow(row)) };
  }

  async findWorkflowByHttpKey(key: string): Promise<WorkflowRecord | undefined> {
    const hit = this.cache.get(this.byHttpKey, key);
    if (hit) return { ...hit };
    if (this.cache.get(this.noWorkflowAtKey, key)) return undefined;
    const row = this.statements.byHttpKey.get(key);
    if (!row) {
      this.cache.set(this.noWorkflowAtKey, key, true);
      return undefined;
    }
    return { ...this.remember(toWorkflow(row)) };
  }

  async findWorkflowByExternalId(workspaceId: string, externalId: string): Promise<WorkflowRecord | undefined> {
    const row = this.statements.byExternalId.get(workspaceId, externalId);
    return row && toWorkflow(row);
  }

  async listWorkflowsOfUser(userId: string, page: PageQuery): Promise<Page<WorkflowRecord>> {
    return readPage(this.statements.ofUser, userId, page, toWorkflow);
  }

  async listWorkflowsOfWorkspace(workspaceId: string, page: PageQuery): Promise<Page<WorkflowRecord>> {
    return readPage(this.statements.ofWorkspace, workspaceId, page, toWorkflow);
  }

  async listActiveTimerTriggers(): Promise<ActiveTimerTrigger[]> {
    return this.statements.activeTimers
      .all()
      .map((row) => ({ workflowId: row.workflow_id, timerId: row.timer_id, spec: JSON.parse(row.spec) }));
  }

  async getStepStates(workflowId: string): Promise<Record<string, StepState>> {
    const hit = this.cache.get(this.statesById, workflowId);
    if (hit) return copyStates(hit);
    const states: Record<string, StepState> = {};
    for (const row of this.statements.states.all(workflowId)) {
      states[row.step_id] = { db: JSON.parse(row.db), version: row.version };
    }
    return copyStates(this.cache.set(this.statesById, workflowId, states));
  }

  async putStepStates(workflowId: string, writes: StepStateWrite[]): Promise<void> {
    // Whether it succeeds or conflicts, the next read of these states goes to the file.
    this.statesById.delete(workflowId);
    this.putStates.immediate(workflowId, writes);
  }

  private save(workflow: WorkflowRecord, create: boolean, expected?: WorkflowVersion): void {
    this.cache.clear();
    try {
      this.write.immediate(workflow, create, expected);
    } catch (error) {
      throw asConflict(error, workflow);
    }
  }

  /** Caches `workflow` (frozen) by id and by each HTTP trigger's key; returns the frozen one. */
  private remember(workflow: WorkflowRecord): WorkflowRecord {
    const frozen = this.cache.set(this.byId, workflow.id, workflow);
    for (const trigger of frozen.triggers) {
      if (trigger.type === "http") this.cache.set(this.byHttpKey, trigger.key, frozen);
    }
    return frozen;
  }
}

/** A copy a caller may change: the map and each state's entry (the `db` values stay shared and frozen). */
function copyStates(states: Record<string, StepState>): Record<string, StepState> {
  const copy: Record<string, StepState> = {};
  for (const [stepId, state] of Object.entries(states)) copy[stepId] = { ...state };
  return copy;
}
