import type { z } from "zod";
import type { workflowRunSchema } from "#http/list-workflow-runs";
import type { componentSchema, eventSummarySchema, sourceSchema } from "#http/schemas";
import type { subscriptionSchema, webhookSchema } from "#http/subscription-schemas";
import type { workflowSchema } from "#http/workflow-schemas";
import { CliError } from "./errors.ts";
import type { Target } from "./profile.ts";
import { type SseMessage, sseMessages } from "./sse.ts";

/* The API's own shapes (types only: nothing of the server is loaded by the CLI). */
export type Source = z.infer<typeof sourceSchema>;
export type Component = z.infer<typeof componentSchema>;
export type EventSummary = z.infer<typeof eventSummarySchema>;
export type Webhook = z.infer<typeof webhookSchema>;
export type Subscription = z.infer<typeof subscriptionSchema>;
export type Workflow = z.infer<typeof workflowSchema>;
export type WorkflowRun = z.infer<typeof workflowRunSchema>;
export interface Page<T> {
  page_info: { total_count: number; count: number; start_cursor: string | null; end_cursor: string | null };
  data: T[];
}

/** An answer of 4xx or 5xx: its status and the API's `{error, details}` message. */
export class ApiError extends CliError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

type Query = Record<string, string | number | undefined>;

/** Why `fetch` could not reach `what`, as a CliError: the network's code (`ECONNREFUSED`) when it gives one. */
export function unreachable(what: string, error: unknown): CliError {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return new CliError(`cannot reach ${what}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
}

/** How long an idle live stream waits before reconnecting after the server closed it. */
const RECONNECT_DELAY_MS = 1_000;

/** The REST API and the live stream of the Sluice `target` names. */
export function apiClient(target: Target, fetchImpl: typeof fetch = fetch) {
  const withQuery = (base: string, query: Query = {}) => {
    const url = new URL(base);
    for (const [name, value] of Object.entries(query))
      if (value !== undefined) url.searchParams.set(name, String(value));
    return url;
  };

  async function send(url: URL, init: RequestInit): Promise<Response> {
    try {
      return await fetchImpl(url, {
        ...init,
        headers: { authorization: `Bearer ${target.apiKey}`, ...(init.headers as Record<string, string>) },
      });
    } catch (error) {
      if ((error as Error).name === "AbortError") throw error;
      throw unreachable(url.origin, error);
    }
  }

  async function failure(response: Response): Promise<ApiError> {
    const text = await response.text();
    let message = text.trim().slice(0, 1000) || response.statusText;
    let details: { field: string; message: string }[] = [];
    try {
      const body = JSON.parse(text) as { error?: string; details?: { field: string; message: string }[] };
      if (typeof body.error === "string") message = body.error;
      details = Array.isArray(body.details) ? body.details : [];
    } catch {
      // Not the API's JSON (a proxy's page): its text is the message.
    }
    const extra = details
      .filter((detail) => !message.includes(detail.message))
      .map((detail) => `\n  ${detail.field}: ${detail.message}`)
      .join("");
    if (response.status === 401) {
      const fix =
        target.keyFrom === "SLUICE_API_KEY"
          ? "SLUICE_API_KEY holds a key this Sluice does not know"
          : "log in again with `sluice login`";
      return new ApiError(401, `the API key was refused by ${target.url} (401: ${message}): ${fix}`);
    }
    return new ApiError(response.status, `${message} (${response.status})${extra}`);
  }

  /** Calls `method path` under `/v1`; resolves with the parsed answer, rejects with an {@link ApiError}. */
  async function call<T>(method: string, path: string, options: { query?: Query; body?: unknown } = {}): Promise<T> {
    const url = withQuery(`${target.url}/v1${path}`, options.query);
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const response = await send(url, {
      method,
      body,
      headers: body === undefined ? {} : { "content-type": "application/json" },
    });
    if (!response.ok) throw await failure(response);
    const text = await response.text();
    try {
      return (text ? JSON.parse(text) : undefined) as T;
    } catch {
      // Something else answered at this address (a proxy's page, another server).
      throw new ApiError(response.status, `${url.origin} did not answer ${method} ${path} as Sluice does (not JSON)`);
    }
  }

  /** Every item of a paginated list, page after page (newest first). */
  async function all<T>(path: string, query: Query = {}): Promise<T[]> {
    const items: T[] = [];
    let after: string | undefined;
    do {
      const page = await call<Page<T>>("GET", path, { query: { ...query, limit: 100, after } });
      items.push(...page.data);
      after = page.data.length > 0 ? (page.page_info.end_cursor ?? undefined) : undefined;
    } while (after !== undefined);
    return items;
  }

  /**
   * Follows the live stream at `path` (under the stream root) until `signal` aborts, handing each
   * message to `onMessage`. Starts after the event `after` when given (what came since, then what
   * comes), and when the server ends the stream (on AWS after 15 minutes) reconnects after what
   * it last received, as an EventSource does. Rejects with an {@link ApiError} when the stream is
   * refused (a bad key, no such source).
   */
  async function follow(
    path: string,
    query: Query,
    options: { after?: string; signal: AbortSignal; onOpen?: () => void },
    onMessage: (message: SseMessage) => void,
  ): Promise<void> {
    let last = options.after;
    while (!options.signal.aborted) {
      let response: Response;
      try {
        response = await send(withQuery(`${target.streamUrl}${path}`, query), {
          signal: options.signal,
          headers: { accept: "text/event-stream", ...(last ? { "last-event-id": last } : {}) },
        });
      } catch (error) {
        if (options.signal.aborted) return;
        throw error;
      }
      if (!response.ok) throw await failure(response);
      options.onOpen?.();
      try {
        for await (const message of sseMessages(response.body ?? emptyBody())) {
          if (message.id) last = message.id;
          onMessage(message);
        }
      } catch (error) {
        if (options.signal.aborted) return;
        // A dropped connection is reconnected below, as the server's retry field asks.
        if ((error as Error).name !== "TypeError" && (error as Error).name !== "AbortError") throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAY_MS));
    }
  }

  return { call, all, follow, target };
}

export type ApiClient = ReturnType<typeof apiClient>;

async function* emptyBody(): AsyncGenerator<Uint8Array> {}
