/**
 * Reading what a workflow emitted (docs/design/workflows.md 1.6, 2.5): `event_summaries` lists
 * its `$.send.emit`s (channel `""`), `$errors/event_summaries` the errors of its runs. Paging,
 * `expand` and the 1 KB cut are the sources' (`listEmitterEvents`).
 */

import type { Deps } from "#core/ports/deps";
import { requireWorkflow } from "./access.ts";
import { ERRORS_CHANNEL } from "./component-model.ts";
import type { Caller } from "./identity.ts";
import { type ListEventsInput, listEmitterEvents } from "./source-events.ts";

/** The channels of a workflow a client may list. */
export type WorkflowEventList = "emits" | "errors";

export async function listWorkflowEvents(
  deps: Pick<Deps, "workflows" | "identity" | "events">,
  caller: Caller,
  workflowId: string,
  input: Omit<ListEventsInput, "event_name">,
  list: WorkflowEventList,
) {
  const channel = list === "errors" ? ERRORS_CHANNEL : "";
  return listEmitterEvents(deps, () => requireWorkflow(deps, caller, workflowId), input, channel);
}
