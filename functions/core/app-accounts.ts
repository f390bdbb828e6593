/**
 * Which app props need a connected account, and the deploy-time refusal of those Sluice cannot
 * run yet (connected accounts are issue 17). An app prop without an account is still bound with
 * its methods and an empty `$auth` (decision 263); what this module decides is whether the
 * component can do its work that way.
 *
 * The rule (docs/components.md "Apps and accounts"):
 * - an app on {@link APPS_WITHOUT_ACCOUNTS} never needs one;
 * - any other app needs one when the code reads a field of its `$auth` (`authFields`, found by
 *   `describeComponent` in the app's functions and in the component's `this.<prop>.$auth.<field>`);
 * - a prop configured with `{authProvisionId}` names an account, and none exists yet.
 * An app that is on no list and whose code reads no `$auth` field runs with the empty `$auth`.
 *
 * Pure: no I/O. When accounts exist, the `authProvisionId` branch becomes a store lookup in the
 * use cases, and an app that needs one is refused only while unset.
 */
import type { Json, PropDescription } from "#runtime/protocol";
import { DomainError, type FieldIssue } from "./errors.ts";

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
]);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Why the app prop `def`, configured as `value`, cannot run here; undefined when it can. */
export function accountProblem(def: PropDescription, value: Json | undefined): string | undefined {
  if (def.type !== "app") return undefined;
  const app = def.app ?? def.name;
  if (isObject(value) && typeof value.authProvisionId === "string") {
    return `names the connected account ${value.authProvisionId.slice(0, 64)}, which does not exist: Sluice has no connected accounts yet (the "${app}" app's $auth would be empty)`;
  }
  if (APPS_WITHOUT_ACCOUNTS.has(app)) return undefined;
  const fields = def.authFields ?? [];
  if (fields.length === 0) return undefined;
  const read = fields
    .slice(0, 3)
    .map((field) => `$auth.${field}`)
    .join(", ");
  return `needs a connected account of the "${app}" app (its code reads ${read}${fields.length > 3 ? ", ..." : ""}); Sluice has no connected accounts yet, so the component cannot run here`;
}

/**
 * Refuses props whose app needs an account Sluice cannot give: a `validation` DomainError naming
 * each as `<fieldPrefix>.<name>`.
 * @throws DomainError `validation`.
 */
export function requireAccounts(
  defs: readonly PropDescription[],
  values: Readonly<Record<string, Json>>,
  fieldPrefix = "configured_props",
): void {
  const issues: FieldIssue[] = [];
  for (const def of defs) {
    const problem = accountProblem(def, values[def.name]);
    if (problem) issues.push({ field: `${fieldPrefix}.${def.name}`, message: problem });
  }
  if (issues.length === 0) return;
  const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join("; ");
  throw new DomainError("validation", summary, issues);
}
