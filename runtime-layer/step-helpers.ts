/**
 * The `$` a workflow step's `run({ steps, $ })` receives (component-model.md "Action helper `$`",
 * real-behaviour.md §1.9), over the step's {@link StepEffects}. What `$` is asked to do is only
 * recorded here: exports stay in the runtime for later steps, sends and the response travel in the
 * run's result, and trusted code applies them (DESIGN.md decision 2).
 *
 * Each `$.send.*` payload is checked for its shape as the call is made, so a wrong call fails the
 * step that made it, with a message naming the field, instead of a delivery later.
 */
import { toJson } from "./describe-component.ts";
import { type FlowUrls, type Json, type PauseKind, SEND_HTTP_METHODS, type SendRecord } from "./protocol.ts";
import { FLOW_PAUSE_MAX_MS, FLOW_RERUN_DEFAULT_MAX, FLOW_RERUN_MAX, FLOW_SUSPEND_DEFAULT_MS } from "./result-limits.ts";

type Bag = Record<string, unknown>;

/** What a step's `$` records into; implemented by the step's state in `run-workflow.ts`. */
export interface StepEffects {
  /** `$.context` of this step: the run's context with `deadline`. */
  readonly context: Json;
  export(name: string, value: unknown): void;
  respond(spec: unknown): Promise<void>;
  /** Ends the run as a success; throws the {@link FLOW_EXIT} sentinel so the step stops here. */
  exit(reason: unknown): never;
  send(record: SendRecord): void;
  /** Pauses the run at the end of this step (`$.flow.*`); returns the run's resume and cancel URLs. */
  pause(request: PauseRequest): FlowUrls;
  /** `$.files`: the project's File Store (`file-store-client.ts`), one for the whole run. */
  readonly files: Bag;
}

/** What a `$.flow.suspend`, `$.flow.delay` or `$.flow.rerun` call asked for, checked. */
export interface PauseRequest {
  kind: PauseKind;
  afterMs: number;
  context?: Json;
  maxReruns?: number;
}

/**
 * Marks the error `$.flow.exit` throws. The run is ended by the call itself, not by the error
 * reaching the runtime: a step that catches it still ends the run (as the original's `__pd_end`).
 */
export const FLOW_EXIT = Symbol.for("sluice.flowExit");

/** The name of the error of a helper Sluice does not provide yet (docs/design/workflows.md §6). */
export const NOT_IMPLEMENTED_ERROR = "NotImplementedError";

const HTTP_METHODS: readonly string[] = SEND_HTTP_METHODS;

const isBag = (value: unknown): value is Bag => typeof value === "object" && value !== null && !Array.isArray(value);

function notImplemented(helper: string): () => never {
  return () => {
    throw Object.assign(new Error(`${helper} is not available in Sluice yet`), { name: NOT_IMPLEMENTED_ERROR });
  };
}

/** The `$` of one step. */
export function createStepHelpers(effects: StepEffects): Bag {
  return {
    export(name: unknown, value: unknown) {
      if (typeof name !== "string" || name === "") throw new TypeError("$.export: the name must be a non-empty string");
      if (name === "$return_value") {
        throw new TypeError("$.export: $return_value is the step's return value; return it instead");
      }
      effects.export(name, value);
    },
    respond: (spec: unknown) => effects.respond(spec),
    context: effects.context,
    flow: {
      exit: (reason?: unknown) => effects.exit(reason),
      suspend: (timeoutMs?: unknown) =>
        effects.pause({ kind: "suspend", afterMs: pauseMs(timeoutMs, "$.flow.suspend", FLOW_SUSPEND_DEFAULT_MS) }),
      delay: (ms: unknown) => effects.pause({ kind: "delay", afterMs: pauseMs(ms, "$.flow.delay") }),
      rerun: (delayMs: unknown, context?: unknown, maxReruns?: unknown) =>
        effects.pause({
          kind: "rerun",
          afterMs: pauseMs(delayMs, "$.flow.rerun"),
          context: payload(context ?? null),
          maxReruns: rerunCount(maxReruns),
        }),
      refreshTimeout: notImplemented("$.flow.refreshTimeout"),
    },
    // Made when code first reads it: most steps never do.
    get files() {
      return effects.files;
    },
    send: {
      http: (config: unknown) => effects.send(httpSend(config)),
      emit: (config: unknown) => effects.send(emitSend(config)),
      sse: (config: unknown) => effects.send(sseSend(config)),
      s3: (config: unknown) => effects.send(s3Send(config)),
      email: notImplemented("$.send.email"),
    },
  };
}

/** The error `$.flow.exit(reason)` throws: an Error, so code that logs what it caught sees why. */
export function flowExitError(reason: string | undefined): Error {
  const error = new Error(reason ?? "the workflow was ended by $.flow.exit");
  return Object.assign(error, {
    name: "FlowExit",
    [FLOW_EXIT]: true,
    __pd_end: { message: reason ?? "", ts: Date.now() },
  });
}

/**
 * A pause's length: a number of milliseconds from 0 to {@link FLOW_PAUSE_MAX_MS}, rounded;
 * `fallback` when none is given (`$.flow.suspend()`).
 */
function pauseMs(value: unknown, helper: string, fallback?: number): number {
  if ((value === undefined || value === null) && fallback !== undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new TypeError(`${helper}: the delay must be a number of milliseconds, 0 or more`);
  }
  if (value > FLOW_PAUSE_MAX_MS) {
    throw new RangeError(`${helper}: a run may pause at most 365 days (${FLOW_PAUSE_MAX_MS} ms)`);
  }
  return Math.round(value);
}

/** `$.flow.rerun`'s third argument: a whole number of reruns, {@link FLOW_RERUN_DEFAULT_MAX} when absent. */
function rerunCount(value: unknown): number {
  if (value === undefined || value === null) return FLOW_RERUN_DEFAULT_MAX;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > FLOW_RERUN_MAX) {
    throw new TypeError(`$.flow.rerun: maxReruns must be a whole number from 0 to ${FLOW_RERUN_MAX}`);
  }
  return value;
}

function config(value: unknown, helper: string): Bag {
  if (!isBag(value)) throw new TypeError(`${helper} expects an object`);
  return value;
}

function text(value: unknown, path: string): string {
  if (typeof value !== "string") throw new TypeError(`${path} must be a string`);
  return value;
}

/** JSON of a payload: what `JSON.stringify` would carry (functions dropped, dates as ISO text). */
const payload = (value: unknown): Json => toJson(value) ?? null;

/** Headers or query parameters: an object of strings; numbers and booleans become strings. */
function stringMap(value: unknown, path: string): Record<string, string> {
  if (!isBag(value)) throw new TypeError(`${path} must be an object`);
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined || item === null) continue;
    if (typeof item !== "string" && typeof item !== "number" && typeof item !== "boolean") {
      throw new TypeError(`${path}.${key} must be a string`);
    }
    Object.defineProperty(out, key, { value: String(item), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function httpSend(value: unknown): SendRecord {
  const from = config(value, "$.send.http");
  const method = text(from.method ?? "POST", "$.send.http: method").toUpperCase();
  if (!HTTP_METHODS.includes(method)) {
    throw new TypeError(`$.send.http: method must be one of ${HTTP_METHODS.join(", ")}`);
  }
  const record: SendRecord & { type: "http" } = { type: "http", method, url: text(from.url, "$.send.http: url") };
  if (from.headers !== undefined) record.headers = stringMap(from.headers, "$.send.http: headers");
  if (from.params !== undefined) record.params = stringMap(from.params, "$.send.http: params");
  if (from.auth !== undefined) {
    const auth = config(from.auth, "$.send.http: auth");
    record.auth = {
      username: text(auth.username, "$.send.http: auth.username"),
      password: text(auth.password, "$.send.http: auth.password"),
    };
  }
  if (from.data !== undefined) record.data = payload(from.data);
  return record;
}

function emitSend(value: unknown): SendRecord {
  const from = config(value, "$.send.emit");
  if (!("raw_event" in from)) throw new TypeError("$.send.emit expects { raw_event }");
  return { type: "emit", raw_event: payload(from.raw_event) };
}

function sseSend(value: unknown): SendRecord {
  const from = config(value, "$.send.sse");
  return { type: "sse", channel: text(from.channel, "$.send.sse: channel"), payload: payload(from.payload) };
}

function s3Send(value: unknown): SendRecord {
  const from = config(value, "$.send.s3");
  return {
    type: "s3",
    bucket: text(from.bucket, "$.send.s3: bucket"),
    // Optional, as the original's: the registry's send-to-S3 action passes an unset prefix as it is.
    prefix: from.prefix === undefined || from.prefix === null ? "" : text(from.prefix, "$.send.s3: prefix"),
    payload: payload(from.payload),
  };
}
