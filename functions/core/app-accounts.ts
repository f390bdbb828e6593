/**
 * Connected accounts in components (docs/components.md "Accounts in components"): which app props
 * need an account, the check at deploy that an `{authProvisionId}` names an account of the
 * caller's workspace for the prop's app, and, for every use (a run, a hook, `options`,
 * `additionalProps`), the account's current credentials as the prop's `$auth`.
 *
 * The rule at deploy (`POST`/`PUT /v1/sources`, a workflow's steps):
 * - a prop configured as `{authProvisionId: "apn_..."}` must name an account of the workspace
 *   whose `app` is the prop's app; an id that does not exist and one of another workspace get the
 *   same message, so nobody learns which ids exist elsewhere;
 * - an unset prop of an app on {@link APPS_WITHOUT_ACCOUNTS} never needs one; any other app needs
 *   one when its code reads a field of `$auth` (`authFields`, found by `describeComponent`).
 *
 * Pure: the store and the key come through `deps`.
 */
import type { AppAccountRecord } from "#core/ports/app-account-store";
import type { Deps } from "#core/ports/deps";
import type { ErrorRecord, Json, PropDescription } from "#runtime/protocol";
import { type CredentialDeps, currentCredentials } from "./account-credentials.ts";
import { clipText } from "./clip-text.ts";
import { DomainError, type FieldIssue } from "./errors.ts";
import { redactPaths } from "./redact-paths.ts";

/**
 * Apps of the public registry whose components need no credentials: their `$auth` is empty in
 * the original too (the `schedule` app's only method logs `Object.keys(this.$auth)`).
 */
export const APPS_WITHOUT_ACCOUNTS: ReadonlySet<string> = new Set([
  "http",
  "schedule",
  "rss",
  "helper_functions",
  "data_stores",
  "formatting",
  "pipedream_utils",
  "emit",
  "sse",
  "filter",
  "delay",
  // Its actions call `$.files` (the project's File Store, Sluice's own); only the app's methods,
  // which call the original's REST API, read `$auth.api_token`.
  "file_store",
]);

/** The `name` of the error a use fails with when its account is gone or cannot give credentials. */
export const ACCOUNT_ERROR = "AccountError";

/**
 * Credential values shorter than this are not masked in what a run stores (a port, `true`): a
 * short value would blank every occurrence of common text in logs, and is no secret worth it.
 */
export const MIN_MASKED_CHARS = 8;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The app slug an app prop needs an account of. */
const appOf = (def: PropDescription) => def.app ?? def.name;

/** The `apn_` id an app prop's value names, if it names one. */
export function accountIdOf(value: Json | undefined): string | undefined {
  return isObject(value) && typeof value.authProvisionId === "string" ? value.authProvisionId : undefined;
}

/** Whether `account` is one the app prop `def` of a component of `workspaceId` may use. */
const usable = (account: AppAccountRecord | undefined, def: PropDescription, workspaceId: string) =>
  account !== undefined && account.workspaceId === workspaceId && account.app === appOf(def);

/**
 * Why the app prop `def`, configured as `value`, cannot be deployed; undefined when it can.
 * `account` is what the store holds under the id `value` names (undefined: nothing). `configuring`
 * (the dynamic props endpoints): every prop is still optional, so only a named account is checked.
 */
export function accountProblem(
  def: PropDescription,
  value: Json | undefined,
  account: AppAccountRecord | undefined,
  workspaceId: string,
  configuring = false,
): string | undefined {
  if (def.type !== "app") return undefined;
  const app = appOf(def);
  const id = accountIdOf(value);
  if (id !== undefined) {
    // Another workspace's account is told apart from none only by its owners.
    if (account === undefined || account.workspaceId !== workspaceId) {
      return `names ${clipText(id, 64)}, which is no connected account of this workspace`;
    }
    if (account.app !== app) {
      return `names the connected account ${account.id} of the "${account.app}" app; this prop needs an account of the "${app}" app`;
    }
    return undefined;
  }
  // The code says it can run without one (`optional: true`): it guards its own `$auth` reads.
  if (configuring || def.optional === true || APPS_WITHOUT_ACCOUNTS.has(app)) return undefined;
  const fields = def.authFields ?? [];
  if (fields.length === 0) return undefined;
  const read = fields
    .slice(0, 3)
    .map((field) => `$auth.${field}`)
    .join(", ");
  return `needs a connected account of the "${app}" app (its code reads ${read}${fields.length > 3 ? ", ..." : ""}): connect one with POST /v1/accounts and configure the prop as {"authProvisionId": "apn_..."}`;
}

/**
 * Refuses app props whose account is missing, of another workspace or of another app, and unset
 * props of apps that need one: a `validation` DomainError naming each as `<fieldPrefix>.<name>`.
 * Reads the store once per named account, and not at all when no prop names one.
 * @throws DomainError `validation`.
 */
export async function requireAccounts(
  deps: Pick<Deps, "appAccounts">,
  workspaceId: string,
  defs: readonly PropDescription[],
  values: Readonly<Record<string, Json>>,
  fieldPrefix = "configured_props",
  configuring = false,
): Promise<void> {
  const apps = defs.filter((def) => def.type === "app");
  if (apps.length === 0) return;
  const accounts = await Promise.all(apps.map((def) => lookUp(deps, accountIdOf(values[def.name]))));
  const issues: FieldIssue[] = [];
  for (const [i, def] of apps.entries()) {
    const problem = accountProblem(def, values[def.name], accounts[i], workspaceId, configuring);
    if (problem) issues.push({ field: `${fieldPrefix}.${def.name}`, message: problem });
  }
  if (issues.length === 0) return;
  const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join("; ");
  throw new DomainError("validation", summary, issues);
}

function lookUp(deps: Pick<Deps, "appAccounts">, id: string | undefined): Promise<AppAccountRecord | undefined> {
  // An id of another shape (`apn_1`) names nothing; a long one is not worth a read.
  if (id === undefined || id.length > 64) return Promise.resolve(undefined);
  return deps.appAccounts.get(id);
}

/** What {@link bindAccounts} made of an invocation's props. */
export interface BoundAccounts {
  /** The props, each app prop configured with an account as `{authProvisionId, $auth}`. */
  props: Record<string, Json>;
  /** The credential values to mask in what the use stores and logs ({@link maskCredentials}). */
  credentials: string[];
  /** Why the use cannot run: an account gone or that gave no credentials. Nothing ran then. */
  error?: ErrorRecord;
}

/**
 * Gives each app prop of `props` configured with `{authProvisionId}` its account's current
 * credentials as `$auth` (fresh for at least `freshForMs`, the use's time limit), read now, so an
 * update or a deletion of the account takes effect on the next use. A prop whose account is gone
 * (deleted since deploy, or no longer the workspace's or the app's) fails the use with an
 * {@link ACCOUNT_ERROR} naming the prop and the account id, never a credential. Props without an
 * account read nothing: a component without accounts costs no store read.
 *
 * @param where how the error names the prop's owner: `the prop "github"` or `the step "b"'s prop "github"`.
 */
export async function bindAccounts(
  deps: CredentialDeps,
  workspaceId: string,
  defs: readonly PropDescription[],
  props: Record<string, Json>,
  freshForMs: number,
  where: (prop: string) => string = (prop) => `the prop "${prop}"`,
): Promise<BoundAccounts> {
  const named = defs.filter((def) => def.type === "app" && accountIdOf(props[def.name]) !== undefined);
  if (named.length === 0) return { props, credentials: [] };
  const bound: Record<string, Json> = { ...props };
  const credentials: string[] = [];
  const failures = await Promise.all(
    named.map(async (def): Promise<string | undefined> => {
      const id = accountIdOf(props[def.name]) as string;
      const account = await lookUp(deps, id);
      if (!usable(account, def, workspaceId)) {
        return `${where(def.name)} names the connected account ${clipText(id, 64)}, which no longer exists in this workspace: connect an account of the "${appOf(def)}" app and configure the prop with it`;
      }
      try {
        const auth = await currentCredentials(deps, account as AppAccountRecord, freshForMs);
        bound[def.name] = { authProvisionId: id, $auth: auth };
        collectStrings(auth, credentials);
        return undefined;
      } catch (error) {
        // The reason is Sluice's own (a refused refresh, a key that cannot open the credentials).
        const reason = clipText(redactPaths(error instanceof Error ? error.message : String(error)), 300);
        return `${where(def.name)}: the connected account ${id} gave no credentials: ${reason}`;
      }
    }),
  );
  const messages = failures.filter((message) => message !== undefined);
  const result: BoundAccounts = { props: bound, credentials };
  if (messages.length > 0) {
    result.error = {
      name: ACCOUNT_ERROR,
      message: maskCredentials(messages.join("; "), credentials),
      ts: deps.clock.nowMs(),
    };
  }
  return result;
}

function collectStrings(value: unknown, into: string[]): void {
  // A number is masked as it prints (an account number given as one is as secret as its text).
  const text = typeof value === "number" && Number.isFinite(value) ? String(value) : value;
  if (typeof text === "string") {
    if (text.length >= MIN_MASKED_CHARS && !into.includes(text)) into.push(text);
  } else if (Array.isArray(value)) {
    for (const item of value) collectStrings(item, into);
  } else if (isObject(value)) {
    for (const item of Object.values(value)) collectStrings(item, into);
  }
}

/** The mask a credential value is replaced with. */
export const MASK = "[credential]";

/**
 * `text` with every credential value replaced by {@link MASK}, in clear and as JSON escapes it (a
 * logged object quotes its strings). Longest first: a key that is part of another (a prefix, a
 * token inside a URL-like credential), masked first, would leave the rest of the longer in clear.
 */
export function maskCredentials(text: string, credentials: readonly string[]): string {
  let out = text;
  for (const credential of [...credentials].sort((a, b) => b.length - a.length)) {
    out = out.split(credential).join(MASK);
    const escaped = JSON.stringify(credential).slice(1, -1);
    if (escaped !== credential) out = out.split(escaped).join(MASK);
  }
  return out;
}

/** An error record with its credential values masked (its name too: the component sets it). */
export function maskedError<T extends ErrorRecord>(error: T, credentials: readonly string[]): T {
  if (credentials.length === 0) return error;
  const out = {
    ...error,
    name: maskCredentials(error.name, credentials),
    message: maskCredentials(error.message, credentials),
  };
  if (error.stack !== undefined) out.stack = maskCredentials(error.stack, credentials);
  return out;
}
