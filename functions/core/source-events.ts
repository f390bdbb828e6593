/**
 * Reading what a source emitted: `GET /sources/{id}/event_summaries`. Newest first, at most the
 * last 100 per page; event data over 1 KB is cut unless `expand=event` asks for all of it. The
 * same list serves any emitter (a workflow's, `workflow-events.ts`), by its id (design W8).
 */

import type { Deps } from "#core/ports/deps";
import type { EventRange } from "#core/ports/event-store";
import { requireSource } from "./access.ts";
import { requireChannelName } from "./channels.ts";
import { DELAYED_CHANNEL } from "./delayed-emits.ts";
import { invalid } from "./errors.ts";
import { compareEventIds, EVENT_ID, requireEventId } from "./event-ids.ts";
import { eventSummaryView } from "./event-views.ts";
import type { Caller } from "./identity.ts";
import { decodeCursor, PAGE_LIMIT_MAX, pageEnvelope } from "./pagination.ts";

export interface ListEventsInput {
  limit?: number | undefined;
  after?: string | undefined;
  before?: string | undefined;
  expand?: string | undefined;
  event_name?: string | undefined;
}

function eventIdFromCursor(cursor: string, field: string): string {
  const id = decodeCursor(cursor, field);
  if (!EVENT_ID.test(id)) throw invalid(field, "is not a valid cursor");
  return id;
}

/**
 * The events of one emitter (`dc_` or `p_`), once the caller's right to it is checked by
 * `require`. The input is checked first, so a malformed request is 400 whatever it names.
 * `channel` fixes the channel (a workflow's lists), else `event_name` chooses it.
 */
export async function listEmitterEvents(
  deps: Pick<Deps, "events">,
  require: () => Promise<{ id: string }>,
  input: ListEventsInput,
  channel?: string,
) {
  if (input.after !== undefined && input.before !== undefined) {
    throw invalid("after", "cannot be combined with before");
  }
  if (input.expand !== undefined && input.expand !== "event") throw invalid("expand", 'must be "event"');
  const query: Parameters<Deps["events"]["listEvents"]>[1] = { limit: input.limit ?? PAGE_LIMIT_MAX };
  if (input.after !== undefined) query.after = eventIdFromCursor(input.after, "after");
  if (input.before !== undefined) query.before = eventIdFromCursor(input.before, "before");
  if (channel !== undefined) query.channel = channel;
  else if (input.event_name !== undefined) query.channel = requireChannelName(input.event_name);
  const emitter = await require();
  const page = await deps.events.listEvents(emitter.id, query);
  const expand = input.expand === "event";
  return pageEnvelope(
    page,
    (event) => event.id,
    (event) => eventSummaryView(event, expand),
    query,
  );
}

export async function listSourceEvents(
  deps: Pick<Deps, "sources" | "identity" | "events">,
  caller: Caller,
  sourceId: string,
  input: ListEventsInput,
) {
  return listEmitterEvents(deps, () => requireSource(deps, caller, sourceId), input);
}

export interface DeleteEventsInput {
  start_id?: string | undefined;
  end_id?: string | undefined;
  event_name?: string | undefined;
}

/**
 * `DELETE /sources/{id}/events`: no ids deletes all, `start_id` from it to the newest, `end_id`
 * from the oldest to it, both the inclusive range (the same id twice: that one event).
 * `event_name` limits the deletion to one channel (`default` or an empty value: the default
 * channel); without it every channel goes, `$logs` and `$errors` included. When this returns, no
 * read shows a deleted event; the space is reclaimed in the background.
 */
export async function deleteSourceEvents(
  deps: Pick<Deps, "sources" | "identity" | "events" | "purger" | "log" | "delayedEmits">,
  caller: Caller,
  sourceId: string,
  input: DeleteEventsInput,
) {
  const range: EventRange = {};
  if (input.start_id !== undefined) {
    requireEventId(input.start_id, "start_id");
    range.fromId = input.start_id;
  }
  if (input.end_id !== undefined) {
    requireEventId(input.end_id, "end_id");
    range.toId = input.end_id;
  }
  if (range.fromId !== undefined && range.toId !== undefined && compareEventIds(range.fromId, range.toId) > 0) {
    throw invalid("start_id", "must not be newer than end_id");
  }
  if (input.event_name !== undefined) range.channel = requireChannelName(input.event_name);
  const source = await requireSource(deps, caller, sourceId);
  // Deleting pending delayed emits (their `$in` copies) cancels them: forgotten first, so none of
  // them can still be delivered once this answers.
  if (range.channel === undefined || range.channel === DELAYED_CHANNEL) {
    await deps.delayedEmits?.removeRange(source.id, range.fromId, range.toId);
  }
  await deps.events.deleteEvents(source.id, range);
  try {
    await deps.purger.purgeLater(source.id);
  } catch (error) {
    // The events are already hidden; the next deletion of this source purges them.
    deps.log.warn("event purge not started", { source_id: source.id, error: String(error) });
  }
  return {
    source_id: source.id,
    start_id: range.fromId ?? null,
    end_id: range.toId ?? null,
    event_name: range.channel ?? null,
  };
}
