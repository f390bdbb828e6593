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

/**
 * What a source invocation runs: `run`, one of the hooks, `additionalProps`, or a prop's `options`
 * (`propOptions`, for the configure endpoint; its request is the `event`, see
 * `prop-options.ts`). A workflow run is its own message ({@link WorkflowInvocation},
 * `kind: "workflow"`), parsed by its own parser.
 */
export type InvocationKind = "run" | "deploy" | "activate" | "deactivate" | "additionalProps" | "propOptions";

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
  /** Where a runtime without a channel to its host (a Lambda function) sends data store calls. */
  dataStoreGrant?: DataStoreGrant;
  /**
   * Whether an `http_request` prop's `execute()` may reach loopback and private addresses (local
   * mode's `SLUICE_WEBHOOK_ALLOW_PRIVATE`); absent or false: it may not, as on AWS.
   */
  allowPrivateAddresses?: boolean;
}

/** Options the code passed to `this.$emit(event, options)`, as JSON. */
export interface EmitMeta {
  id?: string | number;
  name?: string;
  summary?: string;
  ts?: number;
  /** Undocumented delayed emits (real-behaviour.md §1.6): trusted code holds the emit until then (`#core/delayed-emits`). */
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
  /** The `Set-Cookie` values, each written as a header of its own (never in `headers`). */
  cookies?: string[];
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
  /** For `propOptions`: what `options` returned, as JSON, unchecked (trusted code validates it). */
  propOptions?: Json;
  durationMs: number;
}

/** Messages a runtime may send while an invocation runs, before its result. */
export interface RespondMessage {
  type: "respond";
  invocationId: string;
  response: HttpResponseSpec;
}

/**
 * Limits of one workflow run, set per deployment. The runtime keeps to them as the steps run (the
 * call past one throws and fails the run, even when the step catches it); trusted code checks
 * every result against them again.
 */
export interface WorkflowLimits extends EmitLimits {
  /** `$.send.*` calls of one run, emits included; the send past it fails the run. */
  maxSends: number;
  /** UTF-8 bytes of the JSON of all of one run's send records together. */
  maxSendBytes: number;
  /** UTF-8 bytes of the JSON of all exports and return values of one run's steps together. */
  maxExportBytes: number;
}

/** One step of a workflow invocation, in the order the steps run. */
export interface WorkflowStepInvocation {
  /** The step's `c_` id; log lines, outcomes and errors name it. */
  id: string;
  /** `steps.<namespace>` holds the step's return value and exports for later steps. */
  namespace: string;
  /** The step's module: its code hash, resolved by the entry's loader. */
  module: string;
  /** As {@link Invocation.props}; app props arrive as their configured value. */
  props: Record<string, Json>;
  propTypes: Record<string, string>;
  /**
   * The props whose values hold `{{ ... }}` expressions to evaluate as the step starts (trusted
   * code names them: never a secret, a static or a structured prop); absent when none do.
   */
  expressions?: string[];
  /** The step's own `$.service.db` snapshot. */
  db: Record<string, Json>;
}

/**
 * One run of a workflow: its enabled steps, in order, in one invocation. Disabled steps are not
 * sent: trusted code leaves them out.
 */
export interface WorkflowInvocation {
  invocationId: string;
  kind: "workflow";
  /** The workflow (`p_`), visible to step code as `process.env.PD_COMPONENT`. */
  workflowId: string;
  /**
   * `steps.trigger`: the event that started the run and its context. Trusted code leaves `context`
   * out when it is the run's `context` (always, today: it is sent once); the runtime then gives
   * `steps.trigger.context` a copy of that.
   */
  trigger: { event: Json; context?: Json };
  /** `$.context` without `deadline`, which the runtime adds from `timeoutMs`. */
  context: Json;
  steps: WorkflowStepInvocation[];
  /** True for an HTTP trigger with `custom_response`: only then does `$.respond` answer. */
  respondable: boolean;
  /** The whole run, every step together, is stopped after this long. */
  timeoutMs: number;
  limits: WorkflowLimits;
  /** As {@link Invocation.dataStoreGrant}. */
  dataStoreGrant?: DataStoreGrant;
  /** As {@link Invocation.allowPrivateAddresses}, for every step. */
  allowPrivateAddresses?: boolean;
  /**
   * Where this run's pause URLs start (`<public URL>/flow/<run id>/<secret>`, trusted code made the
   * secret): `$.flow.suspend`, `$.flow.delay` and `$.flow.rerun` return it with `/resume` and
   * `/cancel` appended. Absent: the run cannot pause.
   */
  flow?: string;
  /**
   * A run resumed after a pause (docs/workflows.md "Pausing a run"): `steps.<namespace>` of the
   * steps that ran before it, as the pause kept them. The invocation's steps are the ones left.
   */
  resume?: { steps: Record<string, Json> };
  /**
   * A continuation that runs its first step again (`$.flow.rerun`): that step's `$.context.run`
   * gets these (`runs` counts its runs, `context` is what its last run passed, `callback_request`
   * the request to its resume URL); the steps after it see the run's own `run`.
   */
  rerun?: { runs: number; context: Json; callback_request?: Json };
  /**
   * One action run on its own, outside any workflow (the Connect API's run action, docs/
   * components.md "Running an action"): `$.send.*` and the pausing `$.flow` helpers throw, as
   * nothing applies sends or keeps a pause for it, and the result carries `values`.
   */
  standalone?: boolean;
}

/** The URLs of a run's pause: a request to one resumes the run, to the other cancels it. */
export interface FlowUrls {
  resume_url: string;
  cancel_url: string;
}

/** How a step paused its run: `$.flow.suspend`, `$.flow.delay` or `$.flow.rerun`. */
export const PAUSE_KINDS = ["suspend", "delay", "rerun"] as const;
export type PauseKind = (typeof PAUSE_KINDS)[number];

/**
 * A run that paused at the end of a step that succeeded (the last of `WorkflowResult.steps`): no
 * later step ran. `suspend` waits for its resume URL and is cancelled after `afterMs`; `delay`
 * goes on with the next step after `afterMs`; `rerun` runs the same step again after `afterMs`.
 * Either URL may end the wait sooner.
 */
export interface WorkflowPause {
  kind: PauseKind;
  /** The step that paused the run. */
  stepId: string;
  afterMs: number;
  /** `rerun`: `$.context.run.context` of the step's next run. */
  context?: Json;
  /** `rerun`: how many times the step may run again in all. */
  maxReruns?: number;
  /**
   * `steps.<namespace>` of every step that ran, the resumed run's own earlier ones included; the
   * pausing step's only when it does not run again (not `rerun`).
   */
  steps: Record<string, Json>;
}

/** What one `$.send.*` call asked for, in the payload shapes of real-behaviour.md §1.9. */
/** The methods `$.send.http` takes (the runtime refuses others; trusted code checks them again). */
export const SEND_HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] as const;

export type SendRecord =
  | {
      type: "http";
      method: string;
      url: string;
      headers?: Record<string, string>;
      params?: Record<string, string>;
      auth?: { username: string; password: string };
      data?: Json;
    }
  | { type: "emit"; raw_event: Json }
  | { type: "sse"; channel: string; payload: Json }
  | { type: "s3"; bucket: string; prefix: string; payload: Json };

export type StepStatus = "success" | "error" | "exited";

/** What one step did. Its exports and return value stay in the runtime: only their size crosses. */
export interface StepOutcome {
  id: string;
  status: StepStatus;
  /** The step's `$summary` export, when a string (cut to `SUMMARY_MAX_CHARS`). */
  summary?: string;
  /** Bytes of the JSON of the step's exports and return value. */
  exportBytes: number;
  /** Keys the step wrote to its `$.service.db`, with their last value. */
  dbWrites: Record<string, Json>;
  durationMs: number;
  /** Why the step failed (status `error`): what it threw, a limit, the run's time limit. */
  error?: ErrorRecord;
  /** The reason given to `$.flow.exit` (status `exited`), when a string. */
  exitReason?: string;
}

/** A log line of a workflow run, naming the step (`c_`) whose code wrote it. */
export type StepLogRecord = LogRecord & { step: string };

export interface WorkflowResult {
  invocationId: string;
  /** The steps that ran, in order; the last one may have failed or exited, and none follows it. */
  steps: StepOutcome[];
  /** In call order. */
  sends: SendRecord[];
  logs: StepLogRecord[];
  /** The first `$.respond` of the run, given only when the invocation is `respondable`. */
  response?: HttpResponseSpec & { immediate?: boolean };
  /** An error that belongs to no step: the host's kill, a crash, a malformed answer. */
  error?: ErrorRecord;
  /** The run paused at the end of its last step (`$.flow.*`), which succeeded. */
  pause?: WorkflowPause;
  /**
   * Only for a `standalone` invocation: `steps.<namespace>` of each step that ran (its
   * `$return_value` and exports, as JSON), a failed step's exports included.
   */
  values?: Record<string, Json>;
  durationMs: number;
}

/**
 * One call of a `data_store` prop's method (`this.<prop>.get(...)`), sent by the runtime to trusted
 * code while the run goes on; the run awaits its {@link DataStoreReply}. Trusted code takes every
 * field as hostile: `store` must be one of the stores it bound to this run's props.
 * `keys()`, `entries()` and `for await` are pages of `list`.
 */
export type DataStoreCall =
  | { store: string; op: "get" | "has" | "delete"; key: string }
  | { store: string; op: "set"; key: string; value: Json; ttl?: number | null }
  | { store: string; op: "setTtl"; key: string; ttl: number | null }
  | { store: string; op: "list"; after?: string; keysOnly?: boolean }
  | { store: string; op: "clear" };

/**
 * One call of `$.files` (a project's File Store, docs/file-stores.md), sent as a data store call
 * is, and served with the project of the run (never named by the call). `sign` answers the file's
 * `{get_url, put_url, expires_at_ms}`: its content travels by HTTP to and from those URLs, not
 * through trusted code. `dir` answers a page of `{entries, next?}`; `delete` nothing.
 */
export type FileStoreCall =
  | { op: "files.sign"; path: string }
  | { op: "files.delete"; path: string }
  | { op: "files.dir"; path: string; after?: string };

/** The answer to `files.sign`: the file's URLs to read and to write, and when they expire. */
export interface FileStoreSigned {
  get_url: string;
  put_url: string;
  expires_at_ms: number;
}

/** One entry of a `files.dir` page (`{entries, next?}`), folders and files in name order. */
export interface FileStoreEntry {
  /** From the project's root: `reports/2026/a.csv`. */
  path: string;
  /** The last part of the path. */
  name: string;
  type: "file" | "directory";
  /** Files only. */
  size?: number;
  /** Files only, epoch ms. */
  modifiedAtMs?: number;
}

/** What a runtime sends to trusted code while a run goes on: a data store's call or a File Store's. */
export type ServiceCall = DataStoreCall | FileStoreCall;

/** Whether `call` is meant as a File Store call (its `op` is `files.*`), whatever else it holds. */
export function isFileStoreCall(call: unknown): boolean {
  const op = typeof call === "object" && call !== null ? (call as { op?: unknown }).op : undefined;
  return typeof op === "string" && op.startsWith("files.");
}

/** Longest File Store path, in UTF-8 bytes (S3's key limit, less the project prefix). */
export const FILE_STORE_PATH_MAX_BYTES = 900;
/** Most parts (folders and the file) of a File Store path: each folder is an inode on a local disk. */
export const FILE_STORE_PATH_MAX_PARTS = 32;
/** Longest name of one folder or file in a File Store path, in UTF-8 bytes (a file system's limit). */
export const FILE_STORE_NAME_MAX_BYTES = 255;
/** How long a File Store file's URLs are good for: 30 minutes, as the original's `toUrl()`. */
export const FILE_STORE_URL_MS = 30 * 60 * 1000;

/**
 * A File Store path as stored: `a/b/c.png`, relative to the project's root. Leading slashes are
 * dropped (`/logo.png` is `logo.png`); a folder's path may end in one slash (dropped). Returns the
 * path, or why it is not one. `folder` allows the root (an empty path).
 */
export function fileStorePath(raw: unknown, folder = false): { path: string } | { problem: string } {
  if (typeof raw !== "string")
    return { problem: `a File Store path must be a string, not ${raw === null ? "null" : typeof raw}` };
  let path = raw.replace(/^\/+/, "");
  if (folder) path = path.replace(/\/$/, "");
  const shown = JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}...` : raw);
  if (path === "") return folder ? { path } : { problem: `the File Store path ${shown} names no file` };
  if (Buffer.byteLength(path) > FILE_STORE_PATH_MAX_BYTES) {
    return { problem: `a File Store path may be at most ${FILE_STORE_PATH_MAX_BYTES} bytes` };
  }
  // Control characters and lone surrogates have no safe file name; a backslash is a folder on some systems.
  if (/[\p{Cc}\\]|\p{Cs}/u.test(path)) {
    return { problem: `the File Store path ${shown} holds a control character, a backslash or a lone surrogate` };
  }
  const names = path.split("/");
  if (names.length > FILE_STORE_PATH_MAX_PARTS) {
    return { problem: `a File Store path may have at most ${FILE_STORE_PATH_MAX_PARTS} parts` };
  }
  for (const name of names) {
    if (name === "" || name === "." || name === "..") {
      return { problem: `the File Store path ${shown} has an empty, "." or ".." part` };
    }
    if (Buffer.byteLength(name) > FILE_STORE_NAME_MAX_BYTES) {
      return { problem: `each part of a File Store path may be at most ${FILE_STORE_NAME_MAX_BYTES} bytes` };
    }
  }
  return { path };
}

/**
 * How a runtime that cannot message its host while it runs (a source's or workflow's Lambda
 * function) reaches the data stores bound to its run: each call is POSTed as `{grant, call}` to
 * `url`, which answers a {@link DataStoreReply}. `grant` is sealed by trusted code (the run's id,
 * its stores, an expiry): code that reads it can do with it only what its run may do, until then.
 */
export interface DataStoreGrant {
  url: string;
  grant: string;
}

/** Longest data store key, in UTF-8 bytes. */
export const DATA_STORE_KEY_MAX_BYTES = 512;
/** Largest data store value, in UTF-8 bytes of its JSON text (a DynamoDB item holds 400 KB with its key). */
export const DATA_STORE_VALUE_MAX_BYTES = 256 * 1024;
/** Longest data store TTL: ten years, in seconds. */
export const DATA_STORE_TTL_MAX_SECONDS = 10 * 365 * 24 * 3600;

/** Why `key` is no data store key (a string of at most {@link DATA_STORE_KEY_MAX_BYTES}), or undefined. */
export function dataStoreKeyProblem(key: unknown, what = "a data store key"): string | undefined {
  if (typeof key !== "string") return `${what} must be a string, not ${key === null ? "null" : typeof key}`;
  if (Buffer.byteLength(key) > DATA_STORE_KEY_MAX_BYTES)
    return `${what} may be at most ${DATA_STORE_KEY_MAX_BYTES} bytes`;
  // A lone surrogate has no UTF-8: stored as U+FFFD, two keys would become one, and pages skip.
  if (/\p{Cs}/u.test(key)) return `${what} must be well-formed text (it holds a lone surrogate)`;
  return undefined;
}

/** Why `ttl` is no TTL (seconds above 0, at most {@link DATA_STORE_TTL_MAX_SECONDS}; `null` or absent for none), or undefined. */
export function dataStoreTtlProblem(ttl: unknown): string | undefined {
  if (ttl === undefined || ttl === null) return undefined;
  if (typeof ttl === "number" && Number.isFinite(ttl) && ttl > 0 && ttl <= DATA_STORE_TTL_MAX_SECONDS) return undefined;
  return `a data store ttl must be a number of seconds above 0 and at most ${DATA_STORE_TTL_MAX_SECONDS}, or null for none`;
}

/** The answer to a {@link DataStoreCall}: its value (`list`: `{entries: [key, value][], next?}`), or why it failed. */
/** Data store calls one run may make, all its stores together (trusted code refuses the rest). */
export const DATA_STORE_CALLS_PER_RUN = 20_000;

export type DataStoreReply = { ok: true; value?: Json } | { ok: false; error: { name: string; message: string } };

/** Where a `{{ ... }}` expression is in `text`: from its `{{` to after its `}}`, the expression holding at least one character. */
export interface PropExpressionSpan {
  start: number;
  end: number;
}

/**
 * The first `{{ ... }}` expression of a step's prop value at or after `from` (docs/workflows.md
 * "Expressions in props"), or undefined. Linear in the text: the first `}}` after a `{{` ends it,
 * so a text of many `{{` and no `}}` is read once (a regular expression would read it once per
 * `{{`, which a request of 1 MiB of `{` turned into seconds of the server's time).
 */
export function findPropExpression(text: string, from = 0): PropExpressionSpan | undefined {
  const start = text.indexOf("{{", from);
  if (start < 0) return undefined;
  const close = text.indexOf("}}", start + 3);
  return close < 0 ? undefined : { start, end: close + 2 };
}

/** The span of `text`'s expression when it is one expression and nothing else (spaces aside). */
export function wholePropExpression(text: string): PropExpressionSpan | undefined {
  const span = findPropExpression(text);
  if (span === undefined || text.slice(0, span.start).trim() !== "" || text.slice(span.end).trim() !== "") {
    return undefined;
  }
  return span;
}

/** Whether a prop value holds an expression: a string with one, or an array or object holding such a string. */
export function holdsPropExpression(value: unknown): boolean {
  if (typeof value === "string") return findPropExpression(value) !== undefined;
  if (Array.isArray(value)) return value.some(holdsPropExpression);
  if (value !== null && typeof value === "object") return Object.values(value).some(holdsPropExpression);
  return false;
}
