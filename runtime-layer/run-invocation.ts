/**
 * The runtime semantics of one invocation of a component (component-model.md): builds `this`
 * (props, methods, `$emit`, `$.service.db`, the HTTP and timer interfaces, app props), runs `run`,
 * a hook or `additionalProps`, and returns everything the code did as an {@link InvocationResult}.
 * Shared by the local sandbox child (`sandbox-entry.ts`) and the Lambda entry; it does no I/O of
 * its own besides `io.onRespond`.
 */
import { inspect } from "node:util";
import { createDataStoreClient, type DataStoreCaller } from "./data-store-client.ts";
import { describeProps, type PropDescription, toJson } from "./describe-component.ts";
import { httpRequestValue } from "./http-request-prop.ts";
import { answerRespond } from "./http-response.ts";
import { type InvocationScope, runInScope } from "./invocation-scope.ts";
import { runPropOptions } from "./prop-options.ts";
import type {
  EmitMeta,
  EmitRecord,
  ErrorRecord,
  HttpResponseSpec,
  Invocation,
  InvocationResult,
  Json,
  LogLevel,
  LogRecord,
} from "./protocol.ts";
import { EMIT_LIMIT_ERROR, LOG_MAX_BYTES, LOG_RECORD_OVERHEAD } from "./result-limits.ts";
import { toLoadFailure, withPosition } from "./sandbox-channel.ts";
import { createServiceDb, type ServiceDb } from "./service-db.ts";

export { normalizeResponse, STATUS_MESSAGE } from "./http-response.ts";
export { currentInvocationId, failCurrentInvocation, LOG_LEVELS } from "./invocation-scope.ts";
export { DB_MAX_BYTES, LOG_MAX_BYTES } from "./result-limits.ts";

/** Used when an invocation carries no usable `timeoutMs`. */
const DEFAULT_TIMEOUT_MS = 30_000;
const HOOKS = new Set(["deploy", "activate", "deactivate"]);

export interface InvocationIo {
  /** Called once, synchronously, on the first valid `respond` call of the run. */
  onRespond(response: HttpResponseSpec): void;
  /** Where `data_store` props' calls go (trusted code); without it their methods throw. */
  dataStore?: DataStoreCaller;
}

/** For a caller that sends the response only with the result (the Lambda entry). */
const NO_IO: InvocationIo = { onRespond() {} };

type Bag = Record<string, unknown>;
type Outcome = { error?: ErrorRecord; additionalProps?: PropDescription[]; propOptions?: Json };

export const isBag = (value: unknown): value is Bag =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Runs one invocation of `component` (the module's export: the default export of an ES module,
 * `module.exports` of a CommonJS one).
 *
 * Never rejects: what the code threw, and a run that outlived `invocation.timeoutMs`
 * (`TimeoutError`), end up in `result.error`, next to the emits, db writes and logs made before.
 * A synchronous endless loop cannot be stopped from inside the process; the host kills it.
 */
export async function runInvocation(
  component: unknown,
  invocation: Invocation,
  io: InvocationIo = NO_IO,
): Promise<InvocationResult> {
  const started = performance.now();
  const state = new InvocationState(invocation, io);
  const timeoutMs =
    Number.isFinite(invocation.timeoutMs) && invocation.timeoutMs > 0 ? invocation.timeoutMs : DEFAULT_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<Outcome>((resolve) => {
    timer = setTimeout(() => resolve({ error: timeoutError(timeoutMs) }), timeoutMs);
  });
  let outcome: Outcome;
  try {
    outcome = await Promise.race([
      runInScope(state, () => execute(component, state)),
      state.failure.then((error): Outcome => ({ error })),
      timedOut,
    ]);
  } finally {
    clearTimeout(timer);
    state.closed = true;
  }
  // A failure that ends the run (an emit past the limits) wins even when the code caught it and
  // its `run` then returned in the same turn; what it did after the failure is not kept.
  const ended = state.ended;
  if (ended && !outcome.error) outcome = { error: ended.error };
  // Copies: code still running after a timeout must not change a result already handed out.
  const result: InvocationResult = {
    invocationId: invocation.invocationId,
    emits: state.emits.slice(0, ended?.emits ?? state.emits.length),
    dbWrites: { ...(ended?.dbWrites ?? state.dbWrites) },
    logs: state.logs.slice(0, ended?.logs ?? state.logs.length),
    durationMs: performance.now() - started,
  };
  if (outcome.error) result.error = outcome.error;
  if (state.response) result.response = state.response;
  if (outcome.additionalProps) result.additionalProps = outcome.additionalProps;
  if (outcome.propOptions !== undefined) result.propOptions = outcome.propOptions;
  return result;
}

async function execute(component: unknown, state: InvocationState): Promise<Outcome> {
  try {
    if (!isBag(component)) {
      throw new TypeError("the module must export a component object (export default { ... } or module.exports)");
    }
    const self = buildThis(component, state);
    const { kind, event } = state.invocation;
    if (kind === "run") {
      if (typeof component.run === "function") await component.run.call(self, event);
      // A source without `run` (the registry's schedule sources, which declare only a timer)
      // emits the event that started it as it is: the tick, or the HTTP request.
      else if (event !== undefined) await state.emit(event, {});
      return {};
    }
    if (kind === "additionalProps") {
      if (typeof component.additionalProps !== "function") return { additionalProps: [] };
      // The previously returned prop definitions travel in `event`.
      const returned: unknown = await component.additionalProps.call(self, isBag(event) ? event : {});
      return { additionalProps: describeProps(returned) };
    }
    if (kind === "propOptions") {
      const bindApp = (app: Bag) => propValue("app", {}, app, state);
      // An `inputValues` function sees a data store prop as `this` does: the registry's data_stores
      // actions hand `c.dataStore` to the `key` options, which call `dataStore.keys()`.
      const props: Record<string, unknown> = { ...state.props };
      for (const [name, type] of Object.entries(state.propTypes)) {
        if (type === "data_store" && Object.hasOwn(self, name)) props[name] = self[name];
      }
      return { propOptions: await runPropOptions(component, self, event, { props, bindApp }) };
    }
    if (!HOOKS.has(kind)) throw new TypeError(`unknown invocation kind: ${String(kind)}`);
    const hook = isBag(component.hooks) ? component.hooks[kind] : undefined;
    if (typeof hook === "function") await hook.call(self);
    return {};
  } catch (thrown) {
    return { error: toErrorRecord(thrown) };
  }
}

/**
 * What `this` of one invocation is built over: the props and their types, the `$.service.db`
 * snapshot and where its writes go, and what `$emit` and an HTTP interface's `respond` do. A
 * source's invocation and a workflow step (`run-workflow.ts`) each provide their own.
 */
export interface ThisBindings {
  readonly props: Record<string, Json>;
  readonly propTypes: Record<string, string>;
  readonly db: Record<string, Json>;
  readonly dbWrites: Record<string, Json>;
  emit(event: unknown, meta: unknown): unknown;
  respond(spec: unknown): unknown;
  /** Where `data_store` props' calls go; absent where the platform serves none. */
  readonly dataStore?: DataStoreCaller | undefined;
  /** Whether an `http_request` prop's `execute()` may reach private addresses (absent: it may not). */
  readonly allowPrivateAddresses?: boolean;
}

/**
 * `this` of the invocation: methods bound to it, then the props (a prop wins over a method of the
 * same name), then `$emit`. Built afresh for every invocation, so nothing leaks between runs.
 */
export function buildThis(component: Bag, bindings: ThisBindings): Bag {
  const self: Bag = {};
  if (isBag(component.methods)) {
    for (const [name, method] of Object.entries(component.methods)) {
      if (typeof method === "function") self[name] = method.bind(self);
    }
  }
  const declared = isBag(component.props) ? component.props : {};
  const { props, propTypes } = bindings;
  let db: ServiceDb | undefined;
  const serviceDb = () => {
    db ??= createServiceDb(bindings.db ?? {}, bindings.dbWrites);
    return db;
  };
  for (const name of new Set([...Object.keys(declared), ...Object.keys(props)])) {
    const type = propTypes[name] ?? declaredType(declared[name]);
    if (type === "$.service.db") {
      // Needs no configuration: trusted code may leave it out of `props`. All db props share one store.
      self[name] = serviceDb();
    } else if (Object.hasOwn(props, name)) {
      self[name] = propValue(type, props[name] as Json, declared[name], bindings);
    } else if (type === "app" || type === "http_request") {
      // No value configured (an app has no account yet): registry code still calls their methods.
      self[name] = propValue(type, {}, declared[name], bindings);
    }
  }
  self.$emit = (event: unknown, meta?: unknown) => bindings.emit(event, meta);
  return self;
}

function declaredType(declared: unknown): string | undefined {
  if (typeof declared === "string") return declared;
  return isBag(declared) && typeof declared.type === "string" ? declared.type : undefined;
}

/** `this.<prop>` of a prop of `type` configured as `value`. */
export function propValue(type: string | undefined, value: Json, declared: unknown, bindings: ThisBindings): unknown {
  if (type === "$.interface.http") {
    return { ...(isBag(value) ? value : {}), respond: (spec: unknown) => bindings.respond(spec) };
  }
  if (type === "app") return appValue(value, declared);
  if (type === "data_store") return createDataStoreClient(value, bindings.dataStore);
  if (type === "http_request") {
    return httpRequestValue(value, { allowPrivateAddresses: bindings.allowPrivateAddresses === true });
  }
  return value;
}

/** `this.<appProp>`: the configured value (its `$auth`), with the app's methods bound to it. */
function appValue(value: Json, declared: unknown): Bag {
  const app: Bag = isBag(value) ? { ...value } : {};
  if (!isBag(app.$auth)) app.$auth = {};
  const methods = isBag(declared) && isBag(declared.methods) ? declared.methods : {};
  for (const [name, method] of Object.entries(methods)) {
    if (typeof method === "function") app[name] = method.bind(app);
  }
  return app;
}

/** What one invocation collected; also its scope for console, `process.env` and stray errors. */
class InvocationState implements InvocationScope, ThisBindings {
  readonly emits: EmitRecord[] = [];
  readonly dbWrites: Record<string, Json> = {};
  readonly logs: LogRecord[] = [];
  response: HttpResponseSpec | undefined;
  /** A `respond` whose stream body is being read: the first call, so later ones are ignored. */
  responding = false;
  closed = false;
  /** How the run was ended by {@link fail}, and how far it had got then. */
  ended: { error: ErrorRecord; emits: number; logs: number; dbWrites: Record<string, Json> } | undefined;
  private logBytes = 0;
  private emitBytes = 0;
  private settleFailure!: (error: ErrorRecord) => void;
  readonly failure = new Promise<ErrorRecord>((resolve) => {
    this.settleFailure = resolve;
  });

  constructor(
    readonly invocation: Invocation,
    private readonly io: InvocationIo,
  ) {}

  get invocationId(): string {
    return this.invocation.invocationId;
  }

  get sourceId(): string {
    return this.invocation.sourceId;
  }

  get props(): Record<string, Json> {
    return this.invocation.props;
  }

  get propTypes(): Record<string, string> {
    return this.invocation.propTypes;
  }

  get db(): Record<string, Json> {
    return this.invocation.db;
  }

  get dataStore(): DataStoreCaller | undefined {
    return this.io.dataStore;
  }

  get allowPrivateAddresses(): boolean {
    return this.invocation.allowPrivateAddresses === true;
  }

  log(level: LogLevel, message: string): void {
    if (this.logBytes >= LOG_MAX_BYTES) return;
    const bytes = Buffer.byteLength(message) + LOG_RECORD_OVERHEAD;
    if (this.logBytes + bytes > LOG_MAX_BYTES) {
      this.logBytes = LOG_MAX_BYTES;
      const note = `further logs were dropped: one invocation may log at most ${LOG_MAX_BYTES} bytes`;
      this.logs.push({ ts: Date.now(), level: "warn", message: note });
      return;
    }
    this.logBytes += bytes;
    this.logs.push({ ts: Date.now(), level, message });
  }

  /**
   * Ends the run with `thrown`, at once: from here on it emits, logs and answers nothing, and
   * what it had made is what its result keeps (its db writes as they were), whatever the code
   * does after catching the error in the same turn. The first failure wins.
   */
  fail(thrown: unknown): void {
    if (this.ended) return;
    const error = toErrorRecord(thrown);
    this.ended = { error, emits: this.emits.length, logs: this.logs.length, dbWrites: { ...this.dbWrites } };
    this.closed = true;
    this.settleFailure(error);
  }

  emit(event: unknown, meta: unknown): Promise<void> {
    if (this.closed) return Promise.resolve();
    const json = toJson(event) ?? null;
    const limits = this.invocation.limits;
    if (limits) {
      const bytes = Buffer.byteLength(JSON.stringify(json));
      const count = this.emits.length + 1;
      const over =
        count > limits.maxEmits
          ? `one run may emit at most ${limits.maxEmits} events`
          : this.emitBytes + bytes > limits.maxEmitBytes
            ? `one run may emit at most ${limits.maxEmitBytes} bytes of events`
            : undefined;
      if (over) {
        // The run ends here even if the code catches the error: what it emitted so far is kept.
        const error = Object.assign(new Error(`${over}; the ${this.emits.length} emitted before were kept`), {
          name: EMIT_LIMIT_ERROR,
        });
        this.fail(error);
        throw error;
      }
      this.emitBytes += bytes;
    }
    this.emits.push({ event: json, meta: toEmitMeta(meta) });
    return Promise.resolve();
  }

  respond(spec: unknown): Promise<void> | undefined {
    if (this.invocation.kind !== "run") throw new Error("respond can only be called from run");
    // The first call wins (legacy components call it twice); a finished run has answered already.
    if (this.response || this.responding || this.closed) return;
    // A stream body is read first; the promise tells the code when the answer is given.
    return answerRespond(
      spec,
      this,
      () => !this.response && !this.closed,
      (response) => this.answer(response),
    );
  }

  private answer(response: HttpResponseSpec): void {
    this.response = response;
    this.io.onRespond(response);
  }
}

/** Keeps the fields of `$emit`'s options that have the documented types; ignores the rest. */
export function toEmitMeta(options: unknown): EmitMeta {
  const meta: EmitMeta = {};
  if (!isBag(options)) return meta;
  const { id, name, summary, ts, delivery_ts } = options;
  if (typeof id === "string" || (typeof id === "number" && Number.isFinite(id))) meta.id = id;
  if (typeof name === "string") meta.name = name;
  if (typeof summary === "string") meta.summary = summary;
  if (typeof ts === "number" && Number.isFinite(ts)) meta.ts = ts;
  if (typeof delivery_ts === "number" && Number.isFinite(delivery_ts)) meta.delivery_ts = delivery_ts;
  return meta;
}

export function timeoutError(timeoutMs: number): ErrorRecord {
  return { name: "TimeoutError", message: `the invocation timed out after ${timeoutMs / 1000}s`, ts: Date.now() };
}

/** Describes what the code threw: anything, not only an Error. */
export function toErrorRecord(thrown: unknown): ErrorRecord {
  const ts = Date.now();
  try {
    if (thrown instanceof Error || (isBag(thrown) && typeof thrown.message === "string")) {
      const { name, message, stack } = thrown as { name?: unknown; message?: unknown; stack?: unknown };
      const record: ErrorRecord = {
        name: typeof name === "string" && name !== "" ? name : "Error",
        message: typeof message === "string" ? message : String(message),
        ts,
      };
      // @pipedream/platform's ConfigurationError is a message for the user: its stack is shown
      // only when the code asked for it (`new ConfigurationError(message, true)`).
      const exposeStack = (thrown as { exposeStack?: unknown }).exposeStack;
      if (typeof stack === "string" && exposeStack !== false) record.stack = stack;
      return record;
    }
    const message =
      typeof thrown === "string" ? thrown : inspect(thrown, { depth: 2, breakLength: Number.POSITIVE_INFINITY });
    return { name: "Error", message, ts };
  } catch {
    // A proxy or a getter that throws while being described.
    return { name: "Error", message: "the component threw a value that cannot be described", ts };
  }
}

/**
 * The component a freshly imported bundle exports (the default export; esbuild's ESM output of a
 * CommonJS module shows `module.exports` as the default export too), once the promise chains its
 * top level started have settled: a failure there (an un-awaited `import("node:fs").then(...)`)
 * then counts as a load failure rather than a race.
 */
export async function componentExport(module: unknown): Promise<unknown> {
  await new Promise((settled) => setImmediate(settled));
  return (module as { default?: unknown }).default;
}

/** The result of an invocation that did not run: nothing emitted, written or logged. */
export function failedResult(invocationId: string, error: ErrorRecord, durationMs: number): InvocationResult {
  return { invocationId, emits: [], dbWrites: {}, logs: [], error, durationMs };
}

/** The result of an invocation whose component could not be loaded (`thrown` by its module). */
export function loadFailureResult(invocationId: string, thrown: unknown, durationMs: number): InvocationResult {
  const error: ErrorRecord = {
    name: "LoadError",
    message: `the component could not be loaded: ${withPosition(toLoadFailure(thrown))}`,
    ts: Date.now(),
  };
  if (thrown instanceof Error && thrown.stack) error.stack = thrown.stack;
  return failedResult(invocationId, error, durationMs);
}
