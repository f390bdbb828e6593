/**
 * The contract between trusted Sluice code and the runtime that runs a component (a sandbox
 * child process locally, the source's own Lambda function on AWS). Everything here crosses a
 * process boundary as JSON.
 *
 * Component code never touches a store: an invocation carries what the run may read (prop values,
 * the `$.service.db` snapshot, the triggering event) and the result carries what it did (emits, db
 * writes, logs, the HTTP response, the error). Trusted code applies the result (DESIGN.md decision 2).
 */
import type { Json, PropDescription } from "./describe-component.ts";
import type { EmitLimits } from "./result-limits.ts";

export type { EmitLimits, Json, PropDescription };

/** What an invocation runs: `run`, one of the hooks, or `additionalProps`. */
export type InvocationKind = "run" | "deploy" | "activate" | "deactivate" | "additionalProps";

/** The event a source's `run` receives from its HTTP interface (real-behaviour.md §1.2). */
export interface HttpRunEvent {
  method: string;
  /** Path below the endpoint, starting with `/`. */
  path: string;
  query: Record<string, string | string[]>;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  bodyRaw: string;
  /** JSON parsed, form fields as an object, otherwise the raw string; undefined when empty. */
  body?: Json;
  url: string;
  client_ip: string;
}

/** The event a source's `run` receives from its timer (real-behaviour.md §1.3). */
export interface TimerRunEvent {
  /** Epoch seconds of the scheduled time. */
  timestamp: number;
  interval_seconds: number;
  cron?: string;
  timezone?: string;
}

/** One invocation of one source. */
export interface Invocation {
  /** Unique per invocation; correlates the `respond` message with its run. */
  invocationId: string;
  kind: InvocationKind;
  /** The source (`dc_`), visible to the code as `process.env.PD_COMPONENT`. */
  sourceId: string;
  /**
   * What `this.<prop>` is for each prop, secrets already decrypted. Interface and service props
   * arrive in their runtime shape: `$.interface.http` as `{endpoint, customResponse}` (the runtime
   * adds `respond`), `$.interface.timer` as `{type: "$.interface.timer", ...config}`,
   * `$.service.db` as `{type: "$.service.db"}` (the runtime builds `get`/`set` over `db`).
   */
  props: Record<string, Json>;
  /** Types of the props in `props`, so the runtime knows which to turn into objects with methods. */
  propTypes: Record<string, string>;
  /** The source's `$.service.db` snapshot before the run. */
  db: Record<string, Json>;
  /** The triggering event of `run`; absent for hooks. */
  event?: Json;
  /** The run is stopped (and its process killed locally) after this long. */
  timeoutMs: number;
  /** Limits of the run's emits; the emit past one ends the run. Trusted code checks them again. */
  limits?: EmitLimits;
}

/** Options the code passed to `this.$emit(event, options)`, as JSON. */
export interface EmitMeta {
  id?: string | number;
  name?: string;
  summary?: string;
  ts?: number;
  /** Undocumented delayed emits (real-behaviour.md §1.6); kept, not yet acted on. */
  delivery_ts?: number;
}

export interface EmitRecord {
  event: Json;
  meta: EmitMeta;
}

export type LogLevel = "log" | "info" | "warn" | "error" | "debug";

export interface LogRecord {
  /** Epoch milliseconds. */
  ts: number;
  level: LogLevel;
  message: string;
}

export interface ErrorRecord {
  name: string;
  message: string;
  stack?: string;
  /** Epoch milliseconds. */
  ts: number;
}

/** A response given with `this.<http>.respond(...)`, normalised (status 200–599, string body). */
export interface HttpResponseSpec {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** `base64` when `body` carries bytes (a Buffer body). */
  bodyEncoding?: "utf8" | "base64";
}

export interface InvocationResult {
  invocationId: string;
  /** In the order `$emit` was called; trusted code orders by `ts` and applies dedupe. */
  emits: EmitRecord[];
  /** Keys written with `db.set`, with their last value (`null` included). Empty when none. */
  dbWrites: Record<string, Json>;
  logs: LogRecord[];
  /** What `run` or the hook threw, or why it was stopped (timeout, out of memory, crash). */
  error?: ErrorRecord;
  /** The first `respond` call, if any. */
  response?: HttpResponseSpec;
  /** For `additionalProps`: the props it returned, described like `configurable_props`. */
  additionalProps?: PropDescription[];
  durationMs: number;
}

/** Messages a runtime may send while an invocation runs, before its result. */
export interface RespondMessage {
  type: "respond";
  invocationId: string;
  response: HttpResponseSpec;
}
