/**
 * The live stream of a source, `GET /sources/{id}/sse` (rest-api.md "Source events";
 * real-behaviour.md §1.1). This module decides who may stream, what is sent and in which frames;
 * the platforms do the I/O: `functions/local-mode/source-stream-server.ts` pushes events from the
 * in-process bus, and the AWS stream function polls the store.
 *
 * A stream carries one selection of channels: every channel whose name does not start with `$`
 * (the default), or exactly one channel named by `event_name` (`default` or an empty value for the
 * default channel, a custom name, `$logs`, `$errors`). Each event is one SSE message:
 *
 *   id: <event id>
 *   event: <channel>          (absent for the default channel, so `onmessage` receives it)
 *   data: <JSON envelope, one line>
 *
 * A client that reconnects with `Last-Event-ID` (or `?last_event_id=`) first receives the events
 * newer than that id from the history, oldest first, then the live ones: no gap and no repeat, as
 * far back as the history holds.
 */

import type { Deps } from "#core/ports/deps";
import { requireSource } from "./access.ts";
import { requireChannelName } from "./channels.ts";
import type { StoredEvent } from "./component-model.ts";
import { requireEventId } from "./event-ids.ts";
import { sseEnvelope } from "./event-views.ts";
import type { Caller } from "./identity.ts";
import { isId } from "./ids.ts";

/** A comment line sent when nothing else was sent for this long, so proxies keep the connection. */
export const SSE_KEEPALIVE_MS = 15_000;
export const SSE_KEEPALIVE_FRAME = ":keepalive\n\n";
/** Sent first: how long an EventSource waits before reconnecting. */
export const SSE_RETRY_MS = 1_000;
/** Events read from the history per page while catching up. */
export const CATCH_UP_PAGE = 100;

/** Headers of a stream response. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
};

export interface SourceStreamInput {
  /** The `Last-Event-ID` header. */
  lastEventId?: string | undefined;
  /**
   * The `last_event_id` query parameter, for a first connection (a browser EventSource cannot set
   * the header). The header wins when both are sent: it is the newer position.
   */
  last_event_id?: string | undefined;
  event_name?: string | undefined;
}

/** What a stream request follows: a source's events, or a workflow's `$.send.sse` events (`workflow-stream.ts`). */
export interface StreamTarget {
  kind: "source" | "workflow";
  id: string;
}

/** What one client streams. */
export interface SourceStream {
  /** The emitter: a source (`dc_`), or a workflow (`p_`) for its stream (`workflow-stream.ts`). */
  sourceId: string;
  /** One channel, or undefined for every channel not starting with `$`. */
  channel: string | undefined;
  /** Resume after this event id (history first), or undefined to start with the next live event. */
  resumeAfter: string | undefined;
  /**
   * What a message's `event:` names: the event's channel (a source's stream, the default), or the
   * channel its `$.send.sse` gave (a workflow's stream, whose events are all stored on `$sse`).
   */
  names?: "channel" | "send";
}

/**
 * Checks the request and the caller's access (another account's source is 404, as everywhere).
 * Bad input is a 400 naming the field, before anything is streamed.
 */
export async function openSourceStream(
  deps: Pick<Deps, "sources" | "identity">,
  caller: Caller,
  sourceId: string,
  input: SourceStreamInput,
): Promise<SourceStream> {
  const lastEventId = input.lastEventId?.trim() || input.last_event_id?.trim() || undefined;
  if (lastEventId !== undefined) requireEventId(lastEventId, "Last-Event-ID");
  const channel = input.event_name === undefined ? undefined : requireChannelName(input.event_name);
  const source = await requireSource(deps, caller, sourceId);
  return {
    sourceId: source.id,
    channel,
    resumeAfter: lastEventId,
  };
}

/**
 * Whether what a stream follows still exists. Both platforms look now and then (local mode at each
 * keepalive tick, the AWS function once per keepalive interval) and end the streams of a source or
 * workflow deleted meanwhile: its client reconnects and gets 404, instead of keepalives forever.
 */
export async function streamTargetExists(
  deps: Pick<Deps, "sources" | "workflows">,
  stream: Pick<SourceStream, "sourceId">,
): Promise<boolean> {
  if (isId("workflow", stream.sourceId)) return (await deps.workflows.getWorkflow(stream.sourceId)) !== undefined;
  return (await deps.sources.getSource(stream.sourceId)) !== undefined;
}

/** True when the stream carries this event. */
export function streamCarries(stream: Pick<SourceStream, "sourceId" | "channel">, event: StoredEvent): boolean {
  if (event.sourceId !== stream.sourceId) return false;
  return stream.channel === undefined ? !event.channel.startsWith("$") : event.channel === stream.channel;
}

/** One SSE message for an event of `stream`. */
export function sseFrame(stored: StoredEvent, stream?: Pick<SourceStream, "names">): string {
  const eventName = stream?.names === "send" ? (stored.meta.name ?? "") : stored.channel;
  const name = eventName === "" ? "" : `event: ${eventName.replace(/[\r\n]/g, " ")}\n`;
  return `id: ${stored.id}\n${name}data: ${JSON.stringify(sseEnvelope(stored, eventName))}\n\n`;
}

/** The first bytes of every stream: the reconnection delay and a comment that flushes proxies. */
export const SSE_OPENING_FRAME = `retry: ${SSE_RETRY_MS}\n:ok\n\n`;

/**
 * The stream's events newer than `afterId` in the history, oldest first, a page at a time (each
 * page a `before` query, exclusive of its cursor, without a count). Ends when the history has
 * nothing newer; events stored while it runs may or may not be included, so a caller that also
 * receives live events skips the ones the history already sent by id (`compareEventIds`).
 */
export async function* eventsAfter(
  deps: Pick<Deps, "events">,
  stream: Pick<SourceStream, "sourceId" | "channel">,
  afterId: string,
): AsyncGenerator<StoredEvent> {
  let cursor = afterId;
  for (;;) {
    const query: Parameters<Deps["events"]["listEvents"]>[1] = { limit: CATCH_UP_PAGE, before: cursor, count: false };
    if (stream.channel !== undefined) query.channel = stream.channel;
    // The nearest `limit` events newer than the cursor, newest first.
    const { items } = await deps.events.listEvents(stream.sourceId, query);
    for (const event of [...items].reverse()) yield event;
    const newest = items[0];
    if (!newest || items.length < CATCH_UP_PAGE) return;
    cursor = newest.id;
  }
}
