import type { Deps } from "#core/ports/deps";
import { requireWorkspace } from "./access.ts";
import { API_KEY_MIN_LENGTH, API_KEY_PREFIX, bearerToken, hashApiKey, sameHash } from "./api-keys.ts";
import { invalid, notFound, unauthorized } from "./errors.ts";
import type { Caller, NewAccount, Project, User, Workspace } from "./identity.ts";
import { isId } from "./ids.ts";
import { requireDisplayableName } from "./names.ts";

type AccountDeps = Pick<Deps, "identity" | "clock" | "ids">;

export interface CreateAccountInput {
  username: string;
  email: string;
  /** Use this key instead of generating one (CI pipelines set it in advance). */
  apiKey?: string;
  workspaceName?: string;
  projectName?: string;
}

export interface CreatedAccount {
  user: User;
  workspace: Workspace;
  project: Project;
  /** The key in clear, returned once; only its hash is stored. */
  apiKey: string;
}

const USERNAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export function newApiKey(deps: Pick<Deps, "ids">): string {
  return `${API_KEY_PREFIX}${deps.ids.newSecret(24)}`;
}

function checkOperatorKey(key: string): void {
  if (key.length < API_KEY_MIN_LENGTH || /\s/.test(key)) {
    throw invalid("api_key", `must be at least ${API_KEY_MIN_LENGTH} characters without spaces`);
  }
}

/** Creates a user with their own workspace, a default project and an API key. */
export async function createAccount(deps: AccountDeps, input: CreateAccountInput): Promise<CreatedAccount> {
  if (!USERNAME.test(input.username)) {
    throw invalid(
      "username",
      "must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit",
    );
  }
  if (!/^[^\s@]+@[^\s@]+$/.test(input.email)) throw invalid("email", "must be an e-mail address");
  requireDisplayableName("email", input.email);
  if (input.workspaceName !== undefined) requireDisplayableName("workspace_name", input.workspaceName);
  if (input.projectName !== undefined) requireDisplayableName("project_name", input.projectName);
  if (input.apiKey !== undefined) checkOperatorKey(input.apiKey);

  const now = deps.clock.nowMs();
  const key = input.apiKey ?? newApiKey(deps);
  const user: User = {
    id: deps.ids.newId("user"),
    username: input.username,
    email: input.email,
    createdAt: now,
    updatedAt: now,
  };
  const workspaceId = deps.ids.newId("workspace");
  const account: NewAccount = {
    user,
    workspace: {
      id: workspaceId,
      orgname: input.username,
      name: input.workspaceName ?? input.username,
      email: input.email,
      createdAt: now,
      updatedAt: now,
    },
    membership: { workspaceId, userId: user.id, role: "owner", createdAt: now },
    project: {
      id: deps.ids.newId("project"),
      workspaceId,
      name: input.projectName ?? "Default project",
      createdAt: now,
      updatedAt: now,
    },
    apiKey: { id: deps.ids.newId("apiKey"), hash: hashApiKey(key), userId: user.id, label: "initial", createdAt: now },
  };
  const { workspace } = await deps.identity.createAccount(account);
  return { user, workspace, project: account.project, apiKey: key };
}

/** Adds a key to an existing user; returns the key in clear, once. */
export async function addApiKey(
  deps: AccountDeps,
  input: { userId: string; label: string; apiKey?: string },
): Promise<string> {
  if (input.apiKey !== undefined) checkOperatorKey(input.apiKey);
  const key = input.apiKey ?? newApiKey(deps);
  await deps.identity.addApiKey({
    id: deps.ids.newId("apiKey"),
    hash: hashApiKey(key),
    userId: input.userId,
    label: input.label,
    createdAt: deps.clock.nowMs(),
  });
  return key;
}

/** Resolves the caller from an `Authorization` header, or throws `unauthorized`. */
export async function authenticate(deps: Pick<Deps, "identity">, authorization: string | undefined): Promise<Caller> {
  const key = bearerToken(authorization);
  if (key === undefined) throw unauthorized();
  const hash = hashApiKey(key);
  const record = await deps.identity.findApiKeyByHash(hash);
  // The lookup is by hash, so timing reveals nothing about the key; the constant-time comparison
  // guards against a store that matched loosely (prefix, case) returning a near miss.
  if (record === undefined || !sameHash(record.hash, hash)) throw unauthorized("the API key is not valid");
  return { userId: record.userId };
}

export async function requireUser(deps: Pick<Deps, "identity">, caller: Caller): Promise<User> {
  const user = await deps.identity.getUser(caller.userId);
  // A key whose user is gone is as good as revoked.
  if (user === undefined) throw unauthorized("the API key is not valid");
  return user;
}

/**
 * How a create names its workspace: `org_id`, as the spec says creating a resource does, or
 * `workspace_id`, its common parameter (rest-api.md "Common parameters"). Either may come from the
 * query string or the body.
 */
export interface WorkspaceChoice {
  org_id?: string | undefined;
  workspace_id?: string | undefined;
}

/**
 * The workspace id a create names, checked without a lookup: a malformed one is 400 naming its
 * field, as is `org_id` and `workspace_id` naming two different workspaces. `undefined` when
 * neither is given.
 */
export function chosenWorkspace(choice: WorkspaceChoice): { id: string; field: string } | undefined {
  const given = (["org_id", "workspace_id"] as const).filter((field) => choice[field] !== undefined);
  for (const field of given) {
    if (!isId("workspace", choice[field] as string)) throw invalid(field, "must be a workspace id (o_...)");
  }
  const [first, second] = given;
  if (first === undefined) return undefined;
  if (second !== undefined && choice[second] !== choice[first]) {
    throw invalid(first, `names another workspace than ${second}`);
  }
  return { id: choice[first] as string, field: first };
}

/**
 * The workspace a create names ({@link chosenWorkspace}, then {@link requireWorkspace}: one that
 * does not exist or is not the caller's is 404, never the default), or the caller's first one
 * when none is named.
 */
export async function workspaceOrDefault(
  deps: Pick<Deps, "identity">,
  caller: Caller,
  choice: WorkspaceChoice,
): Promise<Workspace> {
  const chosen = chosenWorkspace(choice);
  if (chosen !== undefined) return requireWorkspace(deps, caller, chosen.id);
  const [first] = await deps.identity.listWorkspacesOfUser(caller.userId);
  if (!first) throw notFound("workspace");
  return first;
}
