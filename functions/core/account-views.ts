/** Users, workspaces and projects in the field shapes of `spec/rest-api.md`. */
import type { Quotas } from "#core/ports/deps";
import type { DailyUsage } from "#core/ports/usage-store";
import type { Project, User, Workspace } from "./identity.ts";
import { isoTime } from "./time.ts";

export function workspaceView(workspace: Workspace, usage: DailyUsage, quotas: Quotas) {
  return {
    id: workspace.id,
    orgname: workspace.orgname,
    name: workspace.name,
    email: workspace.email,
    daily_credits_quota: quotas.dailyCredits,
    daily_credits_used: usage.credits,
    // The fields the spec gives legacy-plan workspaces: Sluice enforces these quotas per workspace.
    daily_compute_time_quota: quotas.dailyComputeTimeMs,
    daily_compute_time_used: usage.computeTimeMs,
    daily_invocations_quota: quotas.dailyInvocations,
    daily_invocations_used: usage.invocations,
  };
}

export function userView(user: User, usage: DailyUsage, quotas: Quotas, orgs: ReturnType<typeof workspaceView>[]) {
  return {
    id: user.id,
    username: user.username,
    email: user.email,
    daily_compute_time_quota: quotas.dailyComputeTimeMs,
    daily_compute_time_used: usage.computeTimeMs,
    daily_invocations_quota: quotas.dailyInvocations,
    daily_invocations_used: usage.invocations,
    orgs,
  };
}

export function projectView(project: Project, workspace: Workspace) {
  return {
    id: project.id,
    hid: project.id.slice(project.id.indexOf("_") + 1),
    name: project.name,
    repository_id: null,
    repository_path: null,
    created_at: isoTime(project.createdAt),
    updated_at: isoTime(project.updatedAt),
    org_id: workspace.number,
    exceptions: null,
    allow_support: false,
  };
}
