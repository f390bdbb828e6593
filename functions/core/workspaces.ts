import type { Deps } from "#ports/deps";
import { requireUser, requireWorkspace } from "./accounts.ts";
import type { Caller, Workspace } from "./identity.ts";
import { projectView, usageDay, userView, workspaceView } from "./views.ts";

type ReadDeps = Pick<Deps, "identity" | "usage" | "clock" | "quotas">;

async function presentWorkspace(deps: ReadDeps, workspace: Workspace, day: string) {
  return workspaceView(workspace, await deps.usage.getUsage(workspace.id, day), deps.quotas);
}

/** `GET /users/me`: the caller with today's usage and their workspaces. */
export async function getMe(deps: ReadDeps, caller: Caller) {
  const user = await requireUser(deps, caller);
  const day = usageDay(deps.clock.nowMs());
  const [usage, workspaces] = await Promise.all([
    deps.usage.getUsage(user.id, day),
    deps.identity.listWorkspacesOfUser(user.id),
  ]);
  const orgs = await Promise.all(workspaces.map((w) => presentWorkspace(deps, w, day)));
  return userView(user, usage, deps.quotas, orgs);
}

/** `GET /workspaces/{id}`: a workspace the caller belongs to, with today's credit usage. */
export async function getWorkspace(deps: ReadDeps, caller: Caller, workspaceId: string) {
  const workspace = await requireWorkspace(deps, caller, workspaceId);
  return presentWorkspace(deps, workspace, usageDay(deps.clock.nowMs()));
}

/** `GET /workspaces/{id}/projects`: the projects of a workspace the caller belongs to. */
export async function listProjects(deps: Pick<Deps, "identity">, caller: Caller, workspaceId: string) {
  const workspace = await requireWorkspace(deps, caller, workspaceId);
  const projects = await deps.identity.listProjects(workspace.id);
  return projects.map((project) => projectView(project, workspace));
}
