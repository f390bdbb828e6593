import type { WorkflowRecord } from "#core/workflow-model";

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
