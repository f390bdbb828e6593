/**
 * The live stream of a workflow, `GET /workflows/{id}/sse` (design 1.1 and 2.5): what its runs
 * sent with `$.send.sse({channel, payload})`, stored on the workflow's `$sse` channel. The frames,
 * keepalives, resuming and both platforms' I/O are the source stream's (`source-stream.ts`); what
 * differs is decided here:
 *
 * - each message's `event:` is the `channel` the run gave, so a browser listens with
 *   `addEventListener(channel)` as in the original (real-behaviour.md §1.1);
 * - a client that does not resume first receives the newest {@link WORKFLOW_STREAM_REPLAY} events,
 *   as the original's SSE destination replays them on connect, then the live ones.
 */

import type { Deps } from "#core/ports/deps";
import { requireWorkflow } from "./access.ts";
import { requireEventId } from "./event-ids.ts";
import type { Caller } from "./identity.ts";
import type { SourceStream, SourceStreamInput } from "./source-stream.ts";
import { SSE_CHANNEL } from "./workflow-runs.ts";

/** Events a new client of a workflow's stream receives from the history before the live ones. */
export const WORKFLOW_STREAM_REPLAY = 100;

/** An id no event is older than: resuming after it replays from the first event kept. */
const BEFORE_EVERY_EVENT = "0-0";

/**
 * Checks the request and the caller's access (another account's workflow is 404, as on every
 * workflow route) and opens the stream. A bad `Last-Event-ID` is a 400 naming it.
 */
export async function openWorkflowStream(
  deps: Pick<Deps, "workflows" | "identity" | "events">,
  caller: Caller,
  workflowId: string,
  input: Pick<SourceStreamInput, "lastEventId" | "last_event_id">,
): Promise<SourceStream> {
  const lastEventId = input.lastEventId?.trim() || input.last_event_id?.trim() || undefined;
  if (lastEventId !== undefined) requireEventId(lastEventId, "Last-Event-ID");
  const workflow = await requireWorkflow(deps, caller, workflowId);
  return {
    sourceId: workflow.id,
    channel: SSE_CHANNEL,
    resumeAfter: lastEventId ?? (await replayStart(deps, workflow.id)),
    names: "send",
  };
}

/** The id just before the newest {@link WORKFLOW_STREAM_REPLAY} `$sse` events of the workflow. */
async function replayStart(deps: Pick<Deps, "events">, workflowId: string): Promise<string> {
  const { items } = await deps.events.listEvents(workflowId, {
    channel: SSE_CHANNEL,
    limit: WORKFLOW_STREAM_REPLAY + 1,
    count: false,
  });
  return items[WORKFLOW_STREAM_REPLAY]?.id ?? BEFORE_EVERY_EVENT;
}
