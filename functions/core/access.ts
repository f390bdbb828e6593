/**
 * Who may touch what: every lookup of a resource by a caller goes through here. A resource of
 * another account answers "not found", exactly like one that does not exist, so the ids of other
 * tenants cannot be probed (decision 55). The bottom of core's use cases: it needs only the
 * stores, so any use case may call it without depending on another.
 */
import type { Deps } from "#core/ports/deps";
import { notFound } from "./errors.ts";
import type { Caller, Project, Workspace } from "./identity.ts";

/**
 * The workspace, if the caller is a member. Another account's workspace is "not found", exactly
 * like one that does not exist, so ids of other tenants cannot be probed.
 */
export async function requireWorkspace(
  deps: Pick<Deps, "identity">,
  caller: Caller,
  workspaceId: string,
): Promise<Workspace> {
  const membership = await deps.identity.getMembership(workspaceId, caller.userId);
  const workspace = membership && (await deps.identity.getWorkspace(workspaceId));
  if (!workspace) throw notFound("workspace");
  return workspace;
}

/** A source the caller may manage (a member of its workspace); anything else is "not found". */
export async function requireSource(deps: Pick<Deps, "sources" | "identity">, caller: Caller, id: string) {
  const source = await deps.sources.getSource(id);
  if (!source) throw notFound("source");
  const membership = await deps.identity.getMembership(source.workspaceId, caller.userId);
  if (!membership) throw notFound("source");
  return source;
}

/** A workflow the caller may manage (a member of its workspace); anything else is "not found". */
export async function requireWorkflow(deps: Pick<Deps, "workflows" | "identity">, caller: Caller, id: string) {
  const workflow = await deps.workflows.getWorkflow(id);
  if (!workflow) throw notFound("workflow");
  const membership = await deps.identity.getMembership(workflow.workspaceId, caller.userId);
  if (!membership) throw notFound("workflow");
  return workflow;
}

/** A webhook the caller owns; another user's, or a missing one, is "not found". */
export async function requireWebhook(deps: Pick<Deps, "subscriptions">, caller: Caller, id: string) {
  const webhook = await deps.subscriptions.getWebhook(id);
  if (!webhook || webhook.userId !== caller.userId) throw notFound("webhook");
  return webhook;
}

/** A data store of a workspace the caller belongs to; anything else is "not found". */
export async function requireDataStore(deps: Pick<Deps, "dataStores" | "identity">, caller: Caller, id: string) {
  const store = await deps.dataStores.getStore(id);
  if (!store) throw notFound("data store");
  const membership = await deps.identity.getMembership(store.workspaceId, caller.userId);
  if (!membership) throw notFound("data store");
  return store;
}

/**
 * A connected account of a workspace the caller belongs to; anything else, another tenant's
 * included, is "not found".
 */
export async function requireAppAccount(deps: Pick<Deps, "appAccounts" | "identity">, caller: Caller, id: string) {
  const account = await deps.appAccounts.get(id);
  if (!account) throw notFound("account");
  const membership = await deps.identity.getMembership(account.workspaceId, caller.userId);
  if (!membership) throw notFound("account");
  return account;
}

/**
 * A project of a workspace the caller belongs to, with that workspace; anything else is "not
 * found". Projects are kept under their workspace, so the caller's workspaces are searched (a user
 * belongs to a few).
 */
export async function requireProject(
  deps: Pick<Deps, "identity">,
  caller: Caller,
  projectId: string,
): Promise<{ project: Project; workspace: Workspace }> {
  for (const workspace of await deps.identity.listWorkspacesOfUser(caller.userId)) {
    const project = (await deps.identity.listProjects(workspace.id)).find((candidate) => candidate.id === projectId);
    if (project) return { project, workspace };
  }
  throw notFound("project");
}
