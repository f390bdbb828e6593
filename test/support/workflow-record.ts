import type { WorkflowRecord, WorkflowRun } from "#core/workflow-model";

/**
 * A workflow of `owner` (as `createAccount` or `accountIn` return it) in its default workspace,
 * with no steps' code behind it, for tests that need a stored workflow without building one: pass
 * it to `WorkflowStore.createWorkflow`.
 */
export function workflowRecord(
  owner: { user: { id: string }; workspace: { id: string }; project: { id: string } },
  id: string,
  nowMs = 0,
): WorkflowRecord {
  return {
    id,
    userId: owner.user.id,
    workspaceId: owner.workspace.id,
    projectId: owner.project.id,
    name: "flow",
    active: true,
    deploymentId: "d_01kab00000abcdefghjkmn",
    steps: [],
    triggers: [],
    createdAt: nowMs,
    updatedAt: nowMs,
  };
}

/**
 * A run as a runner begins it (`WorkflowRunStore.beginRun`): running, no steps yet, a lease of a
 * minute from `startedAt`, an HTTP trigger unless `fields` say otherwise.
 */
export function runningRun(
  fields: Pick<WorkflowRun, "id" | "workflowId" | "startedAt"> & Partial<WorkflowRun>,
): WorkflowRun {
  return {
    deploymentId: "d_1",
    trigger: { type: "http", id: "hi_1" },
    status: "running",
    leaseUntilMs: fields.startedAt + 60_000,
    attempts: 0,
    eventPreview: {},
    steps: [],
    logs: [],
    ...fields,
  };
}
