/**
 * One parser per message that crosses the boundary between trusted Sluice code and a component's
 * runtime, used on both platforms: the invocation (read by both entries), and what comes back from
 * the process that ran the code: the result, a `respond`, a description. The local host
 * (`sandbox-owner-process.ts`, `sandbox-process.ts`) and the AWS host (`lambda-component-host.ts`)
 * take these messages through the same functions, so one untrusted answer is treated alike on both.
 *
 * A message is the shape `protocol.ts` declares, exactly: every field of the declared type, no
 * field missing that is required. Keys the protocol does not name are left out of the parsed copy
 * (so a runtime one version ahead still parses). Values the protocol carries as JSON (an event, a
 * db write, a default) are checked to be JSON and handed on as they are, never copied: a copy by
 * assignment would turn a `__proto__` key of the data into a prototype.
 *
 * Limits (how many emits, how large a db, a response's headers) are not a message's shape: trusted
 * code checks them on every result it applies (`functions/core/run-limits.ts`).
 *
 * What a host does with a malformed message is the same everywhere (docs/decisions.md): the run
 * fails with {@link MALFORMED_RESULT_ERROR} and nothing the message carried is applied.
 */
import {
  BOOLEAN_ATTRIBUTES,
  type ComponentDescription,
  HOOK_NAMES,
  NUMBER_ATTRIBUTES,
  STRING_ATTRIBUTES,
} from "./describe-component.ts";
import { LOG_LEVELS } from "./invocation-scope.ts";
import { isJsonValue, isPlainObject } from "./json-value.ts";
import type {
  DataStoreGrant,
  EmitMeta,
  EmitRecord,
  ErrorRecord,
  HttpResponseSpec,
  Invocation,
  InvocationKind,
  InvocationResult,
  Json,
  LogRecord,
  PropDescription,
  SendRecord,
  StepLogRecord,
  StepOutcome,
  WorkflowInvocation,
  WorkflowLimits,
  WorkflowPause,
  WorkflowResult,
  WorkflowStepInvocation,
} from "./protocol.ts";
import { PAUSE_KINDS } from "./protocol.ts";
import type { DescribeReply } from "./sandbox-channel.ts";

/** A parsed message, or the first thing wrong with it (`emits[2].meta.id must be ...`). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

/** The name of the error a run fails with when its runtime's answer is malformed. */
export const MALFORMED_RESULT_ERROR = "SandboxError";

const INVOCATION_KINDS: readonly InvocationKind[] = [
  "run",
  "deploy",
  "activate",
  "deactivate",
  "additionalProps",
  "propOptions",
];
const BODY_ENCODINGS = ["utf8", "base64"] as const;

/** Thrown inside a parser with the path of the bad field; never leaves this module. */
class Malformed {
  constructor(readonly problem: string) {}
}

type Bag = Record<string, unknown>;

const fail = (path: string, expected: string): never => {
  throw new Malformed(`${path} must be ${expected}`);
};

function parsing<T>(build: () => T): Parsed<T> {
  try {
    return { ok: true, value: build() };
  } catch (error) {
    if (error instanceof Malformed) return { ok: false, problem: error.problem };
    throw error;
  }
}

/** The path of `key` below `path`; a key of the sender's is cut, so the problem stays short. */
const at = (path: string, key: string | number) => {
  if (typeof key === "number") return `${path}[${key}]`;
  const name = key.length > 64 ? `${key.slice(0, 64)}...` : key;
  return path === "" ? name : `${path}.${name}`;
};

function object(value: unknown, path: string): Bag {
  return isPlainObject(value) ? value : fail(path || "the message", "an object");
}

function array(value: unknown, path: string): unknown[] {
  return Array.isArray(value) ? value : fail(path, "an array");
}

function string(value: unknown, path: string): string {
  return typeof value === "string" ? value : fail(path, "a string");
}

function finite(value: unknown, path: string): number {
  return typeof value === "number" && Number.isFinite(value) ? value : fail(path, "a finite number");
}

function boolean(value: unknown, path: string): boolean {
  return typeof value === "boolean" ? value : fail(path, "a boolean");
}

function json(value: unknown, path: string): Json {
  return isJsonValue(value) ? value : fail(path, "JSON");
}

function oneOf<T extends string>(value: unknown, choices: readonly T[], path: string): T {
  return choices.includes(value as T) ? (value as T) : fail(path, `one of ${choices.join(", ")}`);
}

/** Copies `key` of `from` into `to` when present, parsed by `parse`. */
function optional<T>(to: Bag, from: Bag, key: string, path: string, parse: (value: unknown, path: string) => T): void {
  if (from[key] !== undefined) to[key] = parse(from[key], at(path, key));
}

function dataStoreGrant(value: unknown, path: string): DataStoreGrant {
  const grant = object(value, path);
  return { url: nonEmpty(grant.url, at(path, "url")), grant: nonEmpty(grant.grant, at(path, "grant")) };
}

/**
 * The invocation as trusted code sends it (read by the Lambda entry and the sandbox entry). Trusted
 * code builds it, so a malformed one is a bug of the host: the entries refuse it.
 */
export function parseInvocation(raw: unknown): Parsed<Invocation> {
  return parsing(() => {
    const value = object(raw, "the invocation");
    const invocationId = nonEmpty(value.invocationId, "invocationId");
    const kind = oneOf(value.kind, INVOCATION_KINDS, "kind");
    const sourceId = nonEmpty(value.sourceId, "sourceId");
    const props = jsonObject(value.props, "props");
    const propTypes = propTypesOf(value.propTypes, "propTypes");
    const db = jsonObject(value.db, "db");
    const timeoutMs = finite(value.timeoutMs, "timeoutMs");
    if (!(timeoutMs > 0)) fail("timeoutMs", "a positive number");
    const invocation: Invocation = {
      invocationId,
      kind,
      sourceId,
      props,
      propTypes,
      db,
      timeoutMs,
    };
    optional(invocation as unknown as Bag, value, "event", "", json);
    if (value.limits !== undefined) {
      const limits = object(value.limits, "limits");
      invocation.limits = {
        maxEmits: finite(limits.maxEmits, "limits.maxEmits"),
        maxEmitBytes: finite(limits.maxEmitBytes, "limits.maxEmitBytes"),
      };
    }
    optional(invocation as unknown as Bag, value, "dataStoreGrant", "", dataStoreGrant);
    optional(invocation as unknown as Bag, value, "allowPrivateAddresses", "", boolean);
    return invocation;
  });
}

function jsonObject(value: unknown, path: string): Record<string, Json> {
  return json(object(value, path), path) as Record<string, Json>;
}

/**
 * A run's result as the runtime that ran the code sent it, for the invocation `invocationId`. Its
 * `durationMs` is the runtime's word; the hosts measure their own.
 */
export function parseInvocationResult(raw: unknown, invocationId: string): Parsed<InvocationResult> {
  return parsing(() => {
    const value = object(raw, "the result");
    if (value.invocationId !== invocationId) fail("invocationId", `the invocation's id (${invocationId})`);
    const result: InvocationResult = {
      invocationId,
      emits: array(value.emits, "emits").map((emit, index) => emitRecord(emit, at("emits", index))),
      dbWrites: jsonObject(value.dbWrites, "dbWrites"),
      logs: array(value.logs, "logs").map((log, index) => logRecord(log, at("logs", index))),
      durationMs: finite(value.durationMs, "durationMs"),
    };
    if (value.error !== undefined) result.error = errorRecord(value.error, "error");
    if (value.response !== undefined) result.response = response(value.response, "response");
    if (value.additionalProps !== undefined) {
      result.additionalProps = array(value.additionalProps, "additionalProps").map((prop, index) =>
        propDescription(prop, at("additionalProps", index)),
      );
    }
    if (value.propOptions !== undefined) result.propOptions = json(value.propOptions, "propOptions");
    return result;
  });
}

function emitRecord(raw: unknown, path: string): EmitRecord {
  const value = object(raw, path);
  if (!("event" in value)) fail(at(path, "event"), "present (null for none)");
  const metaPath = at(path, "meta");
  const from = object(value.meta, metaPath);
  const meta: EmitMeta = {};
  if (from.id !== undefined) {
    const { id } = from;
    meta.id =
      typeof id === "string" || (typeof id === "number" && Number.isFinite(id))
        ? id
        : fail(at(metaPath, "id"), "a string or a finite number");
  }
  optional(meta as Bag, from, "name", metaPath, string);
  optional(meta as Bag, from, "summary", metaPath, string);
  optional(meta as Bag, from, "ts", metaPath, finite);
  optional(meta as Bag, from, "delivery_ts", metaPath, finite);
  return { event: json(value.event, at(path, "event")), meta };
}

function logRecord(raw: unknown, path: string): LogRecord {
  const value = object(raw, path);
  return {
    ts: finite(value.ts, at(path, "ts")),
    level: oneOf(value.level, LOG_LEVELS, at(path, "level")),
    message: string(value.message, at(path, "message")),
  };
}

function errorRecord(raw: unknown, path: string): ErrorRecord {
  const value = object(raw, path);
  const error: ErrorRecord = {
    name: string(value.name, at(path, "name")),
    message: string(value.message, at(path, "message")),
    ts: finite(value.ts, at(path, "ts")),
  };
  optional(error as unknown as Bag, value, "stack", path, string);
  return error;
}

/**
 * A response in the normal form the runtime sends (`normalizeResponse`): an integer status from 200
 * to 599, headers as strings, cookies (if any) as strings, a string body. Header names and values,
 * the cookies and the sizes are checked again by trusted code before the response is written
 * (`checkResponse`).
 */
export function parseHttpResponse(raw: unknown): Parsed<HttpResponseSpec> {
  return parsing(() => response(raw, "response"));
}

function response(raw: unknown, path: string): HttpResponseSpec {
  const value = object(raw, path);
  const status = value.status;
  if (typeof status !== "number" || !Number.isInteger(status) || status < 200 || status > 599) {
    fail(at(path, "status"), "an integer from 200 to 599");
  }
  const headersPath = at(path, "headers");
  const headers = object(value.headers, headersPath);
  for (const [name, header] of Object.entries(headers)) string(header, at(headersPath, name));
  const spec: HttpResponseSpec = {
    status: status as number,
    headers: headers as Record<string, string>,
    body: string(value.body, at(path, "body")),
  };
  if (value.bodyEncoding !== undefined)
    spec.bodyEncoding = oneOf(value.bodyEncoding, BODY_ENCODINGS, at(path, "bodyEncoding"));
  if (value.cookies !== undefined) {
    const cookiesPath = at(path, "cookies");
    spec.cookies = array(value.cookies, cookiesPath).map((cookie, i) => string(cookie, at(cookiesPath, String(i))));
  }
  return spec;
}

const PROP_JSON = ["default", "static"] as const;

/** A prop as `describeProps` describes it (a description's `props`, an `additionalProps` result). */
function propDescription(raw: unknown, path: string): PropDescription {
  const value = object(raw, path);
  const prop: PropDescription = {
    name: string(value.name, at(path, "name")),
    type: string(value.type, at(path, "type")),
  };
  const bag = prop as unknown as Bag;
  for (const key of STRING_ATTRIBUTES) optional(bag, value, key, path, string);
  for (const key of BOOLEAN_ATTRIBUTES) optional(bag, value, key, path, boolean);
  for (const key of NUMBER_ATTRIBUTES) optional(bag, value, key, path, finite);
  for (const key of PROP_JSON) optional(bag, value, key, path, json);
  if (value.options !== undefined)
    prop.options = json(array(value.options, at(path, "options")), at(path, "options")) as Json[];
  if (value.remoteOptions !== undefined && value.remoteOptions !== true) fail(at(path, "remoteOptions"), "true");
  if (value.remoteOptions === true) prop.remoteOptions = true;
  if (value.authFields !== undefined) {
    const fieldsPath = at(path, "authFields");
    prop.authFields = array(value.authFields, fieldsPath).map((field, index) => string(field, at(fieldsPath, index)));
  }
  return prop;
}

/** The answer to a `describe`: the component's description, or why it could not be loaded. */
export function parseDescribeReply(raw: unknown): Parsed<DescribeReply> {
  return parsing((): DescribeReply => {
    const value = object(raw, "the reply");
    if (boolean(value.ok, "ok")) return { ok: true, description: description(value.description, "description") };
    const from = object(value.error, "error");
    const error: Extract<DescribeReply, { ok: false }>["error"] = { message: string(from.message, "error.message") };
    for (const key of ["line", "column"] as const) {
      if (from[key] === undefined) continue;
      if (!Number.isInteger(from[key])) fail(at("error", key), "an integer");
      error[key] = from[key] as number;
    }
    return { ok: false, error };
  });
}

function description(raw: unknown, path: string): ComponentDescription {
  const value = object(raw, path);
  const strings = (field: unknown, fieldPath: string) =>
    array(field, fieldPath).map((item, index) => string(item, at(fieldPath, index)));
  const parsed: ComponentDescription = {
    type: oneOf(value.type, ["source", "action"] as const, at(path, "type")),
    hooks: array(value.hooks, at(path, "hooks")).map((hook, index) =>
      oneOf(hook, HOOK_NAMES, at(at(path, "hooks"), index)),
    ),
    methods: strings(value.methods, at(path, "methods")),
    hasRun: boolean(value.hasRun, at(path, "hasRun")),
    hasAdditionalProps: boolean(value.hasAdditionalProps, at(path, "hasAdditionalProps")),
    props: array(value.props, at(path, "props")).map((prop, index) =>
      propDescription(prop, at(at(path, "props"), index)),
    ),
  };
  for (const key of ["key", "name", "version", "description", "dedupe"] as const) {
    optional(parsed as unknown as Bag, value, key, path, string);
  }
  return parsed;
}

const nonEmpty = (field: unknown, path: string) =>
  string(field, path) !== "" ? (field as string) : fail(path, "a non-empty string");

function propTypesOf(value: unknown, path: string): Record<string, string> {
  const types = object(value, path);
  for (const [name, type] of Object.entries(types)) string(type, at(path, name));
  return types as Record<string, string>;
}

const WORKFLOW_LIMITS = ["maxEmits", "maxEmitBytes", "maxSends", "maxSendBytes", "maxExportBytes"] as const;

/**
 * A workflow run as trusted code sends it (`kind: "workflow"`). The entries tell it from a source's
 * invocation by `kind` and parse it with this; like {@link parseInvocation}, a malformed one is a
 * bug of the host and the entries refuse it.
 */
export function parseWorkflowInvocation(raw: unknown): Parsed<WorkflowInvocation> {
  return parsing(() => {
    const value = object(raw, "the invocation");
    const invocationId = nonEmpty(value.invocationId, "invocationId");
    if (value.kind !== "workflow") fail("kind", "workflow");
    const trigger = object(value.trigger, "trigger");
    if (!("event" in trigger)) fail(at("trigger", "event"), "present (null for none)");
    const timeoutMs = finite(value.timeoutMs, "timeoutMs");
    if (!(timeoutMs > 0)) fail("timeoutMs", "a positive number");
    const from = object(value.limits, "limits");
    const limits = {} as WorkflowLimits;
    for (const key of WORKFLOW_LIMITS) limits[key] = finite(from[key], at("limits", key));
    const namespaces = new Set<string>();
    const steps = array(value.steps, "steps").map((item, index): WorkflowStepInvocation => {
      const path = at("steps", index);
      const step = object(item, path);
      const namespace = nonEmpty(step.namespace, at(path, "namespace"));
      // `trigger` is the event's, and a repeated namespace would hide a step's exports.
      if (namespace === "trigger" || namespaces.has(namespace)) fail(at(path, "namespace"), "unique and not trigger");
      namespaces.add(namespace);
      return {
        id: nonEmpty(step.id, at(path, "id")),
        namespace,
        module: nonEmpty(step.module, at(path, "module")),
        props: jsonObject(step.props, at(path, "props")),
        propTypes: propTypesOf(step.propTypes, at(path, "propTypes")),
        ...(step.expressions === undefined
          ? {}
          : {
              expressions: array(step.expressions, at(path, "expressions")).map((name, i) =>
                string(name, at(at(path, "expressions"), i)),
              ),
            }),
        db: jsonObject(step.db, at(path, "db")),
      };
    });
    const invocation: WorkflowInvocation = {
      invocationId,
      kind: "workflow",
      workflowId: nonEmpty(value.workflowId, "workflowId"),
      trigger:
        "context" in trigger
          ? { event: json(trigger.event, "trigger.event"), context: json(trigger.context, "trigger.context") }
          : { event: json(trigger.event, "trigger.event") },
      context: json(value.context, "context"),
      steps,
      respondable: boolean(value.respondable, "respondable"),
      timeoutMs,
      limits,
    };
    optional(invocation as unknown as Bag, value, "dataStoreGrant", "", dataStoreGrant);
    optional(invocation as unknown as Bag, value, "allowPrivateAddresses", "", boolean);
    if (value.flow !== undefined) invocation.flow = nonEmpty(value.flow, "flow");
    optional(invocation as unknown as Bag, value, "standalone", "", boolean);
    if (value.rerun !== undefined) {
      const rerun = object(value.rerun, "rerun");
      invocation.rerun = {
        runs: finite(rerun.runs, at("rerun", "runs")),
        context: json(rerun.context, at("rerun", "context")),
      };
      if (rerun.callback_request !== undefined) {
        invocation.rerun.callback_request = json(rerun.callback_request, at("rerun", "callback_request"));
      }
    }
    if (value.resume !== undefined) {
      const resume = object(value.resume, "resume");
      invocation.resume = { steps: jsonObject(resume.steps, at("resume", "steps")) };
    }
    return invocation;
  });
}

/**
 * A workflow run's result as the runtime that ran the steps sent it, for the invocation
 * `invocationId`: its shape only. Whether its steps are the invocation's, in order, and whether
 * its sends are within the limits, is trusted code's to check (`checkWorkflowResult`), since that
 * needs the invocation.
 */
export function parseWorkflowResult(raw: unknown, invocationId: string): Parsed<WorkflowResult> {
  return parsing(() => {
    const value = object(raw, "the result");
    if (value.invocationId !== invocationId) fail("invocationId", `the invocation's id (${invocationId})`);
    const result: WorkflowResult = {
      invocationId,
      steps: array(value.steps, "steps").map((step, index) => stepOutcome(step, at("steps", index))),
      sends: array(value.sends, "sends").map((send, index) => sendRecord(send, at("sends", index))),
      logs: array(value.logs, "logs").map((log, index): StepLogRecord => {
        const path = at("logs", index);
        return { ...logRecord(log, path), step: string(object(log, path).step, at(path, "step")) };
      }),
      durationMs: finite(value.durationMs, "durationMs"),
    };
    if (value.response !== undefined) {
      const spec: WorkflowResult["response"] = response(value.response, "response");
      const immediate = object(value.response, "response").immediate;
      if (immediate !== undefined) spec.immediate = boolean(immediate, "response.immediate");
      result.response = spec;
    }
    if (value.error !== undefined) result.error = errorRecord(value.error, "error");
    if (value.pause !== undefined) result.pause = workflowPause(value.pause, "pause");
    if (value.values !== undefined) result.values = jsonObject(value.values, "values");
    return result;
  });
}

/** A pause's shape; whether it fits the run (its step, its length, its state) is trusted code's to check. */
function workflowPause(raw: unknown, path: string): WorkflowPause {
  const value = object(raw, path);
  const pause: WorkflowPause = {
    kind: oneOf(value.kind, PAUSE_KINDS, at(path, "kind")),
    stepId: nonEmpty(value.stepId, at(path, "stepId")),
    afterMs: finite(value.afterMs, at(path, "afterMs")),
    steps: jsonObject(value.steps, at(path, "steps")),
  };
  if (value.context !== undefined) pause.context = json(value.context, at(path, "context"));
  if (value.maxReruns !== undefined) pause.maxReruns = finite(value.maxReruns, at(path, "maxReruns"));
  return pause;
}

const STEP_STATUSES = ["success", "error", "exited"] as const;

function stepOutcome(raw: unknown, path: string): StepOutcome {
  const value = object(raw, path);
  const outcome: StepOutcome = {
    id: nonEmpty(value.id, at(path, "id")),
    status: oneOf(value.status, STEP_STATUSES, at(path, "status")),
    exportBytes: finite(value.exportBytes, at(path, "exportBytes")),
    dbWrites: jsonObject(value.dbWrites, at(path, "dbWrites")),
    durationMs: finite(value.durationMs, at(path, "durationMs")),
  };
  if (outcome.exportBytes < 0) fail(at(path, "exportBytes"), "a number of bytes");
  optional(outcome as unknown as Bag, value, "summary", path, string);
  optional(outcome as unknown as Bag, value, "exitReason", path, string);
  if (value.error !== undefined) outcome.error = errorRecord(value.error, at(path, "error"));
  // An error only on a failed step, and a failed step always says why: trusted code relies on both.
  if ((outcome.status === "error") !== (outcome.error !== undefined)) {
    fail(at(path, "error"), "present exactly when the status is error");
  }
  if (outcome.exitReason !== undefined && outcome.status !== "exited")
    fail(at(path, "exitReason"), "absent unless exited");
  return outcome;
}

function stringRecord(raw: unknown, path: string): Record<string, string> {
  const value = object(raw, path);
  for (const [key, item] of Object.entries(value)) string(item, at(path, key));
  return value as Record<string, string>;
}

const SEND_TYPES = ["http", "emit", "sse", "s3"] as const;

function sendRecord(raw: unknown, path: string): SendRecord {
  const value = object(raw, path);
  const type = oneOf(value.type, SEND_TYPES, at(path, "type"));
  const payload = (key: string) => {
    if (!(key in value)) fail(at(path, key), "present (null for none)");
    return json(value[key], at(path, key));
  };
  if (type === "emit") return { type, raw_event: payload("raw_event") };
  if (type === "sse") return { type, channel: string(value.channel, at(path, "channel")), payload: payload("payload") };
  if (type === "s3") {
    return {
      type,
      bucket: string(value.bucket, at(path, "bucket")),
      prefix: string(value.prefix, at(path, "prefix")),
      payload: payload("payload"),
    };
  }
  const send: SendRecord = {
    type,
    method: string(value.method, at(path, "method")),
    url: string(value.url, at(path, "url")),
  };
  optional(send as Bag, value, "headers", path, stringRecord);
  optional(send as Bag, value, "params", path, stringRecord);
  if (value.auth !== undefined) {
    const auth = object(value.auth, at(path, "auth"));
    send.auth = {
      username: string(auth.username, at(path, "auth.username")),
      password: string(auth.password, at(path, "auth.password")),
    };
  }
  optional(send as Bag, value, "data", path, json);
  return send;
}

/**
 * The error of a run whose runtime sent a malformed `message` (`problem`, from a parser). The run
 * fails with it (`failedResult`): nothing the message carried is applied.
 */
export function malformedError(message: "result" | "response", problem: string, ts: number): ErrorRecord {
  return {
    name: MALFORMED_RESULT_ERROR,
    message: `the component's runtime sent a malformed ${message} (${problem}); nothing of it was applied`,
    ts,
  };
}
