import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import type { Writable } from "node:stream";
import { nextTurn } from "#adapters/local/event-loop";
import type { InProcessEventBus } from "#adapters/local/in-process-event-bus";
import { authenticate } from "#core/accounts";
import type { StoredEvent } from "#core/component-model";
import { DomainError } from "#core/errors";
import { compareEventIds } from "#core/event-ids";
import type { Deps } from "#core/ports/deps";
import {
  CATCH_UP_PAGE,
  eventsAfter,
  openSourceStream,
  type SourceStream,
  SSE_HEADERS,
  SSE_KEEPALIVE_FRAME,
  SSE_KEEPALIVE_MS,
  SSE_OPENING_FRAME,
  type StreamTarget,
  sseFrame,
  streamCarries,
  streamTargetExists,
} from "#core/source-stream";
import { openWorkflowStream } from "#core/workflow-stream";
import { type HttpResult, jsonResult } from "#http/responses";
import { streamRefusal } from "#http/stream-refusal";

/** `/sources/{id}/sse`, without a version segment (rest-api.md "Source events"). */
export const STREAM_PATH = /^\/sources\/([^/]+)\/sse$/;
/** `/workflows/{workflow_id}/sse`, a workflow's `$.send.sse` events (docs/design/workflows.md 2.5). */
export const WORKFLOW_STREAM_PATH = /^\/workflows\/([^/]+)\/sse$/;

/**
 * Bytes a client may leave unread (the response's and its socket's buffers) before it is
 * disconnected. A client that reconnects with `Last-Event-ID` catches up from the history.
 */
export const MAX_UNSENT_BYTES = 1024 * 1024;

export interface SourceStreamServerOptions {
  deps: Deps;
  /** The bus core publishes every stored event on (`localDeps().bus`). */
  bus: Pick<InProcessEventBus, "subscribe">;
  /** A comment is sent to a client nothing was sent to for this long. @default SSE_KEEPALIVE_MS */
  keepaliveMs?: number;
  /** See {@link MAX_UNSENT_BYTES}. @default MAX_UNSENT_BYTES */
  maxUnsentBytes?: number;
}

/**
 * The headers of a stream, besides the platform-neutral {@link SSE_HEADERS}: the body runs until the
 * connection closes (no chunked transfer encoding), so each frame is written to the client's socket
 * as it is, the same bytes for every client of a selection.
 */
const LOCAL_SSE_HEADERS: Readonly<Record<string, string>> = { ...SSE_HEADERS, connection: "close" };

/** A live event kept for a client that is still being sent the history. */
interface PendingFrame {
  id: string;
  text: string;
}

interface StreamClient {
  readonly stream: SourceStream;
  /** Clients with the same selection get the same bytes: frames are joined once per selection. */
  readonly selection: string;
  readonly response: ServerResponse;
  /**
   * Where the body is written: the connection's socket once the response owns it (after the headers,
   * every write is one plain socket write of the shared frame), else the response, which holds the
   * bytes until an earlier response on the same connection is done.
   */
  out: Writable;
  open: boolean;
  lastWriteMs: number;
  /** Live frames that arrived while the history was being sent; undefined once the client is live. */
  backlog: PendingFrame[] | undefined;
  backlogBytes: number;
}

/** The clients of one source and its single bus subscription. */
interface SourceHub {
  clients: Set<StreamClient>;
  unsubscribe: () => void;
}

/** The frames one publish sends to one selection, encoded once for all its clients. */
interface Batch {
  frames: PendingFrame[];
  bytes: Buffer;
}

function sendResult(response: ServerResponse, result: HttpResult, requestId: string): void {
  response.writeHead(result.statusCode, { ...result.headers, "x-request-id": requestId });
  response.end(result.body);
}

/**
 * The live streams of local mode, `GET /sources/{id}/sse` and `GET /workflows/{id}/sse`
 * (docs/events.md "Live stream"). One bus subscription per followed source (or workflow) feeds
 * every client of it: each event is framed once
 * and written to the clients whose selection carries it. A client resuming with `Last-Event-ID`
 * is subscribed before the history is read, so events stored meanwhile are kept aside and sent
 * after the history, skipping what the history already sent.
 *
 * Slow clients: writes never wait for a live client. One whose unsent bytes pass
 * `maxUnsentBytes` (or whose kept-aside live events do, while it catches up) is disconnected;
 * it resumes from the history with `Last-Event-ID`.
 */
export class SourceStreamServer {
  private readonly deps: Deps;
  private readonly bus: Pick<InProcessEventBus, "subscribe">;
  private readonly keepaliveMs: number;
  private readonly maxUnsentBytes: number;
  private readonly hubs = new Map<string, SourceHub>();
  private clientTotal = 0;
  private ticker: NodeJS.Timeout | undefined;
  private closing = false;
  /** A look for deleted sources and workflows is under way ({@link endDeleted}). */
  private looking = false;

  constructor(options: SourceStreamServerOptions) {
    this.deps = options.deps;
    this.bus = options.bus;
    this.keepaliveMs = options.keepaliveMs ?? SSE_KEEPALIVE_MS;
    this.maxUnsentBytes = options.maxUnsentBytes ?? MAX_UNSENT_BYTES;
  }

  /** Open streams, of one source or of all. */
  clientCount(sourceId?: string): number {
    return sourceId === undefined ? this.clientTotal : (this.hubs.get(sourceId)?.clients.size ?? 0);
  }

  /**
   * Serves one stream request. Errors before streaming answer like the API (JSON, 401 with
   * `www-authenticate`, 404, 400 naming the field, 405 with `allow`). `requestId`: the id of the
   * server's request line, sent as `x-request-id`.
   */
  async handle(
    request: IncomingMessage,
    response: ServerResponse,
    url: URL,
    target: StreamTarget,
    requestId: string = randomUUID(),
  ): Promise<void> {
    request.resume();
    let gone = false;
    let client: StreamClient | undefined;
    response.once("close", () => {
      gone = true;
      if (client) this.detach(client);
    });
    if (request.method !== "GET") {
      const notGet = new DomainError("method_not_allowed", `${request.method} is not allowed on ${url.pathname}`);
      return sendResult(response, streamRefusal(notGet, requestId, undefined), requestId);
    }

    let stream: SourceStream;
    try {
      const caller = await authenticate(this.deps, request.headers.authorization);
      const header = request.headers["last-event-id"];
      const resume = {
        lastEventId: typeof header === "string" ? header : undefined,
        last_event_id: url.searchParams.get("last_event_id") ?? undefined,
      };
      stream =
        target.kind === "workflow"
          ? await openWorkflowStream(this.deps, caller, target.id, resume)
          : await openSourceStream(this.deps, caller, target.id, {
              ...resume,
              event_name: url.searchParams.get("event_name") ?? undefined,
            });
    } catch (error) {
      const log = this.deps.log.child({ request_id: requestId });
      return sendResult(response, streamRefusal(error, requestId, log), requestId);
    }
    if (gone) return;
    if (this.closing) return sendResult(response, jsonResult(503, { error: "the server is stopping" }), requestId);

    request.socket.setNoDelay(true);
    // Without chunked encoding the body is delimited by the end of the connection (RFC 9112 §6.3),
    // which is how a stream ends anyway: frames then need no per-client framing at all.
    response.removeHeader("transfer-encoding");
    response.writeHead(200, { ...LOCAL_SSE_HEADERS, "x-request-id": requestId });
    response.flushHeaders();
    client = this.attach(stream, response);
    this.write(client, SSE_OPENING_FRAME, performance.now());
    if (stream.resumeAfter !== undefined) await this.catchUp(client, stream.resumeAfter);
  }

  /** Ends every stream (server stop) and stops following sources. New streams are refused. */
  close(): void {
    this.closing = true;
    for (const hub of [...this.hubs.values()]) {
      for (const client of [...hub.clients]) this.end(client);
    }
  }

  /** Ends one client's stream: it may reconnect (with `Last-Event-ID`). */
  private end(client: StreamClient): void {
    this.detach(client);
    // The connection is closed once the end is flushed, so the server's close does not wait for it.
    const { socket } = client.response;
    client.response.end(() => socket?.destroy());
  }

  /**
   * Ends the streams of the sources and workflows deleted since they were opened
   * ({@link streamTargetExists}): one look per followed source or workflow, at each keepalive tick.
   */
  private async endDeleted(): Promise<void> {
    if (this.looking || this.hubs.size === 0) return;
    this.looking = true;
    try {
      for (const [sourceId, hub] of [...this.hubs]) {
        if (await streamTargetExists(this.deps, { sourceId })) continue;
        for (const client of [...hub.clients]) this.end(client);
      }
    } catch (error) {
      // The store failed: the next tick looks again.
      this.deps.log.warn("live streams: could not look for deleted sources", { error: String(error) });
    } finally {
      this.looking = false;
    }
  }

  private attach(stream: SourceStream, response: ServerResponse): StreamClient {
    const client: StreamClient = {
      stream,
      selection: stream.channel === undefined ? "*" : `=${stream.channel}`,
      response,
      // The headers are in the socket's queue once the response owns the socket, so writing to the
      // socket directly keeps the order. A pipelined request waits for the responses before it.
      out: response.socket ?? response,
      open: true,
      lastWriteMs: performance.now(),
      backlog: stream.resumeAfter === undefined ? undefined : [],
      backlogBytes: 0,
    };
    let hub = this.hubs.get(stream.sourceId);
    if (!hub) {
      const clients = new Set<StreamClient>();
      const unsubscribe = this.bus.subscribe(stream.sourceId, (events) => this.broadcast(clients, events));
      hub = { clients, unsubscribe };
      this.hubs.set(stream.sourceId, hub);
    }
    hub.clients.add(client);
    this.clientTotal++;
    if (!this.ticker) {
      this.ticker = setInterval(() => this.keepalive(), Math.max(1, Math.floor(this.keepaliveMs / 4)));
      this.ticker.unref();
    }
    return client;
  }

  private detach(client: StreamClient): void {
    if (!client.open) return;
    client.open = false;
    client.backlog = undefined;
    this.clientTotal--;
    const hub = this.hubs.get(client.stream.sourceId);
    if (hub?.clients.delete(client) && hub.clients.size === 0) {
      hub.unsubscribe();
      this.hubs.delete(client.stream.sourceId);
    }
    if (this.clientTotal === 0 && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  /** Sends one publish (one source, id order) to the source's clients. */
  private broadcast(clients: Set<StreamClient>, events: readonly StoredEvent[]): void {
    const now = performance.now();
    const framed: (string | undefined)[] = [];
    const batches = new Map<string, Batch>();
    for (const client of clients) {
      let batch = batches.get(client.selection);
      if (!batch) {
        const frames: PendingFrame[] = [];
        events.forEach((event, i) => {
          if (!streamCarries(client.stream, event)) return;
          framed[i] ??= sseFrame(event, client.stream);
          frames.push({ id: event.id, text: framed[i] });
        });
        batch = { frames, bytes: Buffer.from(frames.map((frame) => frame.text).join("")) };
        batches.set(client.selection, batch);
      }
      if (batch.frames.length === 0) continue;
      if (client.backlog) this.keepAside(client, batch);
      else this.write(client, batch.bytes, now);
    }
  }

  private keepAside(client: StreamClient, batch: Batch): void {
    client.backlog?.push(...batch.frames);
    client.backlogBytes += batch.bytes.length;
    if (client.backlogBytes > this.maxUnsentBytes) this.disconnect(client, "too many live events while catching up");
  }

  private write(client: StreamClient, data: string | Buffer, now: number): void {
    // A connection the client is ending is left alone: its `close` detaches it.
    if (!client.open || !client.out.writable) return;
    // What the client has not taken yet: the socket's buffer (and the response's, when the socket
    // is not its yet). Checked before the write, so one event larger than the bound still reaches
    // a client that keeps up.
    if (client.out.writableLength > this.maxUnsentBytes) {
      this.disconnect(client, "too slow");
      return;
    }
    client.out.write(data);
    client.lastWriteMs = now;
  }

  private disconnect(client: StreamClient, reason: string): void {
    this.detach(client);
    this.deps.log.info("live stream client disconnected", { source_id: client.stream.sourceId, reason });
    client.response.destroy();
  }

  /**
   * Sends the history after `afterId`, waiting for the client to read it, then the live events
   * kept aside meanwhile that are newer than the last one sent. One page of history per turn of the
   * event loop: a client resuming from the first of a million events must not hold up the others,
   * and a fast reader never makes the socket wait (which would have yielded).
   */
  private async catchUp(client: StreamClient, afterId: string): Promise<void> {
    let lastId = afterId;
    // A page's frames go out in one write (one syscall, not one per event).
    let page: string[] = [];
    const send = async () => {
      if (page.length === 0 || !client.open) return;
      const flushed = client.out.write(page.join(""));
      page = [];
      client.lastWriteMs = performance.now();
      if (!flushed) await drained(client.out);
    };
    try {
      for await (const event of eventsAfter(this.deps, client.stream, afterId)) {
        if (!client.open) return;
        page.push(sseFrame(event, client.stream));
        lastId = event.id;
        if (page.length < CATCH_UP_PAGE) continue;
        await send();
        // The next page is read when the generator is pulled past this one's last event.
        await nextTurn();
      }
      await send();
    } catch (error) {
      this.deps.log.error("live stream history could not be read", {
        source_id: client.stream.sourceId,
        error: String(error),
      });
      if (client.open) this.disconnect(client, "history unavailable");
      return;
    }
    const backlog = client.backlog;
    if (!client.open || !backlog) return;
    client.backlog = undefined;
    client.backlogBytes = 0;
    const rest = backlog.filter((frame) => compareEventIds(frame.id, lastId) > 0);
    if (rest.length > 0) this.write(client, rest.map((frame) => frame.text).join(""), performance.now());
  }

  private keepalive(): void {
    void this.endDeleted();
    const now = performance.now();
    for (const hub of this.hubs.values()) {
      for (const client of hub.clients) {
        if (!client.backlog && now - client.lastWriteMs >= this.keepaliveMs) {
          this.write(client, SSE_KEEPALIVE_FRAME, now);
        }
      }
    }
  }
}

/** Resolves when the client's buffer drains or the connection closes. */
function drained(out: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (out.destroyed) return resolve();
    const done = () => {
      out.off("drain", done);
      out.off("close", done);
      resolve();
    };
    out.on("drain", done);
    out.on("close", done);
  });
}
