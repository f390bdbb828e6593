import type { z } from "zod";
import type { Caller } from "#core/identity";
import type { Deps } from "#core/ports/deps";

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

/** What a route's function may do with a table; `lib/` turns it into IAM grants. */
export type TableAccess = "read" | "write";

/** What a route does with component code; see `RouteDefinition.access.compute`. */
export type ComputeAccess = "describe" | "probe" | "run" | "remove" | "deploy";

export interface RouteInput<P, Q, B> {
  caller: Caller;
  params: P;
  query: Q;
  body: B;
  requestId: string;
  /** The `Idempotency-Key` header, when sent (only `create-source` reads it). */
  idempotencyKey: string | undefined;
  /**
   * Epoch ms by which the function must answer (AWS: Lambda's and API Gateway's limits, less a
   * margin; `answer-deadline.ts`); undefined locally. `create-source`, `update-source` and the workflow routes spend it by phase.
   */
  answerByMs: number | undefined;
}

/**
 * One REST endpoint, declared once and read by local mode, the CDK service stack, the OpenAPI
 * generator and the tests. `name` is also the file name under `functions/http/` whose `handler`
 * export is the endpoint's Lambda entry point.
 */
export interface RouteDefinition<P = unknown, Q = unknown, B = unknown> {
  name: string;
  method: HttpMethod;
  /** Full path with API Gateway placeholders, e.g. `/v1/workspaces/{workspace_id}`. */
  path: string;
  summary: string;
  /** False only for public documents such as the OpenAPI file. @default true */
  auth?: boolean;
  /** Tables the function reads or writes, for least-privilege grants. */
  access: {
    resources?: TableAccess;
    /**
     * What the route does with component code, each level a superset of the one before it but
     * `remove`, which builds nothing (on AWS, which Lambda, IAM and Scheduler rights it gets):
     * - `describe`: bundles code and reads its metadata in the sandbox (the describer function);
     * - `probe`: also creates or updates a probe source's function and invokes it (dynamic props);
     * - `run`: also a probe workflow's (an action run on its own: the Connect run action);
     * - `remove`: runs sources' `deactivate` hooks, deletes their functions and schedules;
     * - `deploy`: creates, updates, runs the hooks of and deletes sources, workflows and their timers.
     */
    compute?: ComputeAccess;
    /**
     * Opens secrets (`open`: KMS decrypt on AWS), or seals and opens them (`seal`): secret prop
     * values, webhook signing secrets, data store grants.
     */
    secrets?: "open" | "seal";
    /** Starts the background purge of deleted events (invokes the event-purger function on AWS). */
    eventPurges?: boolean;
    /**
     * Serves runs' `$.files` calls: signs File Store URLs, lists and deletes files (on AWS, rights
     * on the File Store bucket and its name).
     */
    files?: boolean;
    /** Queues webhook deliveries (sends to the FIFO delivery queue on AWS): dead-letter replays. */
    deliveries?: boolean;
    /**
     * Forgets a workflow's paused runs (`PausedRunStore.removeWorkflow`: their rows, and on AWS their
     * schedules): the routes whose use case can delete a workflow, its creation's rollback included.
     */
    pausedRuns?: boolean;
  };
  params?: z.ZodType<P>;
  /**
   * Checks what the path names once the path is valid, before the query and body are: a path id
   * of another tenant is then 404 whatever the body holds, as for an id that does not exist.
   */
  guard?(deps: Deps, input: { caller: Caller; params: P }): Promise<void>;
  query?: z.ZodType<Q>;
  /**
   * Request headers the route reads besides `Authorization`, for the OpenAPI document only: the
   * pipeline passes them on as they came (`RouteInput.idempotencyKey`) and core validates them.
   */
  headers?: z.ZodObject;
  body?: z.ZodType<B>;
  /** Schema of the success body, for the OpenAPI document and response tests. */
  response: z.ZodType;
  /** @default 200 */
  successStatus?: number;
  /** When the route answers 409 Conflict (besides an `Idempotency-Key` in progress), for the OpenAPI document. */
  conflict?: string;
  /**
   * `html`: the route answers a browser, not a client: `run` returns an {@link HtmlPage} whose
   * status and text are answered as an escaped HTML page (the OAuth callback). Errors the
   * pipeline itself raises stay JSON. @default "json"
   */
  answers?: "json" | "html";
  run(deps: Deps, input: RouteInput<P, Q, B>): Promise<unknown>;
}

/** Declares a route with its types inferred from its schemas. */
export function defineRoute<P = undefined, Q = undefined, B = undefined>(route: RouteDefinition<P, Q, B>) {
  return route;
}

export type AnyRoute = RouteDefinition<any, any, any>;

/** What an `answers: "html"` route's `run` returns: plain text, escaped when rendered. */
export interface HtmlPage {
  status: number;
  title: string;
  message: string;
}
