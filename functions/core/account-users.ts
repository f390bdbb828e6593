/**
 * Which sources and workflows of a workspace use a connected account: those with a configured
 * prop `{authProvisionId: "<the account>"}` (a source's props, or a workflow step's). Deleting an
 * account in use is refused with this list (409) unless forced; a refused OAuth refresh is
 * reported on the same sources' `$errors`.
 */
import { PAGE_LIMIT_MAX, type Page, type PageQuery } from "./pagination.ts";
import type { Deps } from "./ports/deps.ts";

export interface AccountUser {
  id: string;
  name: string;
}

export interface AccountUsers {
  sources: AccountUser[];
  workflows: AccountUser[];
}

/** Whether a configured prop value names the account. */
export function namesAccount(value: unknown, accountId: string): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    (value as { authProvisionId?: unknown }).authProvisionId === accountId
  );
}

const anyNames = (props: Record<string, unknown>, accountId: string) =>
  Object.values(props).some((value) => namesAccount(value, accountId));

/** Every item of a newest-first list, a page of {@link PAGE_LIMIT_MAX} at a time. */
async function everyItem<T extends { id: string }>(readPage: (page: PageQuery) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await readPage(after === undefined ? { limit: PAGE_LIMIT_MAX } : { limit: PAGE_LIMIT_MAX, after });
    items.push(...page.items);
    const last = page.items.at(-1);
    if (last === undefined || page.items.length < PAGE_LIMIT_MAX) return items;
    after = last.id;
  }
}

/** The sources and workflows of `workspaceId` whose configured props name `accountId`, newest first. */
export async function accountUsers(
  deps: Pick<Deps, "sources" | "workflows">,
  workspaceId: string,
  accountId: string,
): Promise<AccountUsers> {
  const [sources, workflows] = await Promise.all([
    everyItem((page) => deps.sources.listSourcesOfWorkspace(workspaceId, page)),
    everyItem((page) => deps.workflows.listWorkflowsOfWorkspace(workspaceId, page)),
  ]);
  return {
    sources: sources
      .filter((source) => anyNames(source.configuredProps, accountId))
      .map((source) => ({ id: source.id, name: source.name })),
    workflows: workflows
      .filter((workflow) => workflow.steps.some((step) => anyNames(step.configuredProps, accountId)))
      .map((workflow) => ({ id: workflow.id, name: workflow.name })),
  };
}
