import type { Deps } from "#core/ports/deps";
import type { DailyUsage } from "#core/ports/usage-store";
import { requireWorkspace } from "./access.ts";
import { projectView, userView, workspaceView } from "./account-views.ts";
import { requireUser } from "./accounts.ts";
import type { Caller, Workspace } from "./identity.ts";
import { usageDay } from "./time.ts";

type ReadDeps = Pick<Deps, "identity" | "usage" | "clock" | "quotas">;

async function presentWorkspace(deps: ReadDeps, workspace: Workspace, day: string) {
  return workspaceView(workspace, await deps.usage.getUsage(workspace.id, day), deps.quotas);
}

/**
 * `GET /users/me`: the caller with today's usage and their workspaces. Runs are counted (and the
 * quotas enforced) per workspace, so the user's figures add up those of their workspaces.
 */
export async function getMe(deps: ReadDeps, caller: Caller) {
  const user = await requireUser(deps, caller);
  const day = usageDay(deps.clock.nowMs());
  const workspaces = await deps.identity.listWorkspacesOfUser(user.id);
  const usages = await Promise.all(workspaces.map((workspace) => deps.usage.getUsage(workspace.id, day)));
  const orgs = workspaces.map((workspace, index) => workspaceView(workspace, usages[index] as DailyUsage, deps.quotas));
  const total: DailyUsage = { invocations: 0, computeTimeMs: 0, credits: 0 };
  for (const usage of usages) {
    total.invocations += usage.invocations;
    total.computeTimeMs += usage.computeTimeMs;
    total.credits += usage.credits;
  }
  return userView(user, total, deps.quotas, orgs);
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
