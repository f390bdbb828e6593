/**
 * The runtime of one workflow run (docs/design/workflows.md §3.4): the enabled steps of a
 * {@link WorkflowInvocation} run in order in one invocation, each as `run({ steps, $ })` with
 * `this` built as a source's is (`buildThis`). `steps.trigger` is the triggering event and its
 * context, and `steps.<namespace>` holds each earlier step's return value (`$return_value`) and
 * exports. Shared by the local sandbox child and the Lambda entry; it does no I/O of its own
 * besides loading step modules through the caller's loader.
 *
 * Exports and return values never leave the runtime (only their sizes do), so a result stays
 * small however much the steps export; what does leave is bounded by the invocation's limits.
 */

import type { DataStoreCaller } from "./data-store-client.ts";
import { toJson } from "./describe-component.ts";
import { createFilesApi } from "./file-store-client.ts";
import { installComponentGlobals } from "./globals.ts";
import { answerRespond, isStreamBody } from "./http-response.ts";
import { type InvocationScope, runInScope } from "./invocation-scope.ts";
import { jsonBytesWithin } from "./json-value.ts";
import { evaluatePropExpressions } from "./prop-expressions.ts";
import type {
  ErrorRecord,
  FlowUrls,
  HttpResponseSpec,
  Json,
  LogLevel,
  SendRecord,
  StepLogRecord,
  StepOutcome,
  WorkflowInvocation,
  WorkflowPause,
  WorkflowResult,
  WorkflowStepInvocation,
} from "./protocol.ts";
import {
  EMIT_LIMIT_ERROR,
  ERROR_TEXT_MAX_CHARS,
  EXIT_REASON_MAX_CHARS,
  EXPORT_LIMIT_ERROR,
  LOG_MAX_BYTES,
  LOG_RECORD_OVERHEAD,
  PAUSE_ERROR,
  PAUSE_STATE_MAX_BYTES,
  SEND_LIMIT_ERROR,
  SUMMARY_MAX_CHARS,
} from "./result-limits.ts";
import { buildThis, isBag, type ThisBindings, timeoutError, toErrorRecord } from "./run-invocation.ts";
import { toLoadFailure, withPosition } from "./sandbox-channel.ts";
import {
  createStepHelpers,
  flowExitError,
  NOT_IMPLEMENTED_ERROR,
  type PauseRequest,
  type StepEffects,
} from "./step-helpers.ts";

/** Used when an invocation carries no usable `timeoutMs`. */
const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Gives the component a step's module exports (its `module`, a code hash), as `componentExport`
 * does for a source. The entries load each module once per process.
 */
export type StepLoader = (module: string) => Promise<unknown>;

type Bag = Record<string, unknown>;
type StepEnd = { status: "success" } | { status: "error"; error: ErrorRecord } | { status: "exited"; reason?: string };

/**
 * Runs the steps of `invocation` in order and returns what they did.
 *
 * Never rejects. A step that throws (anything, not only an Error), goes past a limit, fails to
 * load, or is running when the run's time limit comes ends the run with status `error` on that
 * step; a step that calls `$.flow.exit` ends it with `exited`; no later step runs either way. An
 * `await`-less endless loop cannot be stopped from inside the process: the host kills it.
 */
export async function runWorkflowSteps(
  load: StepLoader,
  invocation: WorkflowInvocation,
  dataStore?: DataStoreCaller,
): Promise<WorkflowResult> {
  installComponentGlobals();
  const started = performance.now();
  const run = new RunState(invocation, dataStore);
  const timeoutMs =
    Number.isFinite(invocation.timeoutMs) && invocation.timeoutMs > 0 ? invocation.timeoutMs : DEFAULT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<StepEnd>((resolve) => {
    timer = setTimeout(() => resolve({ status: "error", error: timeoutError(timeoutMs) }), timeoutMs);
  });
  const steps: Bag = {};
  // A resumed run: the steps that ran before its pause, as the pause kept them.
  for (const [namespace, kept] of Object.entries(invocation.resume?.steps ?? {})) define(steps, namespace, kept);
  // Without its own, the trigger's context is the run's, copied so that a step changing one never
  // changes the other (each step's `$.context` is a copy of the run's too).
  const triggerContext = "context" in invocation.trigger ? invocation.trigger.context : toJson(invocation.context);
  steps.trigger = { event: invocation.trigger.event, context: triggerContext ?? null };
  const outcomes: StepOutcome[] = [];
  try {
    for (const step of invocation.steps) {
      const outcome = await runStep(load, step, run, steps, deadline, timedOut);
      outcomes.push(outcome);
      if (outcome.status !== "success" || run.pause) break;
    }
  } finally {
    clearTimeout(timer);
    run.closed = true;
  }
  // Copies: code still running after its step ended must not change a result already handed out.
  const result: WorkflowResult = {
    invocationId: invocation.invocationId,
    steps: outcomes,
    sends: [...run.sends],
    logs: [...run.logs],
    durationMs: performance.now() - started,
  };
  if (run.response) result.response = run.response;
  if (run.pause) result.pause = run.pause;
  if (invocation.standalone === true) result.values = valuesOf(steps);
  return result;
}

async function runStep(
  load: StepLoader,
  step: WorkflowStepInvocation,
  run: RunState,
  steps: Bag,
  deadline: number,
  timedOut: Promise<StepEnd>,
): Promise<StepOutcome> {
  const began = performance.now();
  const state = new StepState(run, step, deadline);
  let raced: StepEnd;
  try {
    raced = await Promise.race([runInScope(state, () => execute(load, step, state, steps)), state.stopped, timedOut]);
  } finally {
    state.closed = true;
  }
  // What ended the step first wins: an exit or a limit the code caught is still the end.
  const end = state.end ?? raced;
  const outcome: StepOutcome = {
    id: step.id,
    status: end.status,
    exportBytes: state.exportBytes,
    dbWrites: { ...state.dbWrites },
    durationMs: performance.now() - began,
  };
  if (state.summary !== undefined) outcome.summary = state.summary;
  if (end.status === "error") outcome.error = cutError(end.error);
  if (end.status === "exited" && end.reason !== undefined) outcome.exitReason = end.reason;
  // A run on its own answers its caller with a failed step's exports too: nothing runs after it.
  if (end.status !== "success" && run.invocation.standalone === true) define(steps, step.namespace, state.exports);
  if (end.status === "success") {
    // A step that runs again keeps nothing of this run: its next run's exports are the ones that count.
    // defineProperty: a namespace or an export named `__proto__` is data, which an assignment would drop.
    if (state.pauseRequest?.kind !== "rerun") define(steps, step.namespace, state.exports);
    if (state.pauseRequest) {
      const pause = pauseOf(step, state.pauseRequest, steps);
      if ("error" in pause) {
        outcome.status = "error";
        outcome.error = pause.error;
      } else run.pause = pause;
    }
  }
  return outcome;
}

/** `steps.<namespace>` of the steps that ran, as JSON copies (code may still change them in place). */
function valuesOf(steps: Bag): Record<string, Json> {
  const values: Record<string, Json> = {};
  for (const [namespace, value] of Object.entries(steps)) {
    if (namespace !== "trigger") define(values, namespace, toJson(value) ?? null);
  }
  return values;
}

/**
 * The pause a step asked for, with what the run keeps until it resumes: every step's exports so far
 * (JSON copies: code may have changed them in place), within {@link PAUSE_STATE_MAX_BYTES}; or the
 * error the step fails with when they are more.
 */
function pauseOf(
  step: WorkflowStepInvocation,
  request: PauseRequest,
  steps: Bag,
): WorkflowPause | { error: ErrorRecord } {
  const kept: Record<string, Json> = {};
  for (const [namespace, value] of Object.entries(steps)) {
    if (namespace !== "trigger") define(kept, namespace, toJson(value) ?? null);
  }
  const bytes =
    jsonBytesWithin(kept, PAUSE_STATE_MAX_BYTES) + jsonBytesWithin(request.context ?? null, PAUSE_STATE_MAX_BYTES);
  if (bytes > PAUSE_STATE_MAX_BYTES) {
    const message = `$.flow.${request.kind}: the run cannot pause: the steps' exports it would keep${request.context === undefined ? "" : " and the rerun's context"} are over ${PAUSE_STATE_MAX_BYTES} bytes; export less before pausing`;
    return { error: { name: PAUSE_ERROR, message, ts: Date.now() } };
  }
  const pause: WorkflowPause = { kind: request.kind, stepId: step.id, afterMs: request.afterMs, steps: kept };
  if (request.context !== undefined) pause.context = request.context;
  if (request.maxReruns !== undefined) pause.maxReruns = request.maxReruns;
  return pause;
}

async function execute(load: StepLoader, step: WorkflowStepInvocation, state: StepState, steps: Bag): Promise<StepEnd> {
  let component: unknown;
  try {
    component = await load(step.module);
  } catch (thrown) {
    const error: ErrorRecord = {
      name: "LoadError",
      message: `the step could not be loaded: ${withPosition(toLoadFailure(thrown))}`,
      ts: Date.now(),
    };
    if (thrown instanceof Error && thrown.stack) error.stack = thrown.stack;
    return { status: "error", error };
  }
  try {
    if (!isBag(component) || typeof component.run !== "function") {
      throw new TypeError(
        "a step's module must export a component with run({ steps, $ }) (export default defineComponent({ ... }))",
      );
    }
    // The props' `{{ ... }}` expressions read the earlier steps: evaluated as this step starts.
    // Awaited only when there are any: a step without expressions (every code step) pays no turn.
    if (step.expressions !== undefined) await state.evaluateExpressions(steps);
    const self = buildThis(component, state);
    const returned: unknown = await component.run.call(self, { steps, $: createStepHelpers(state) });
    state.recordReturn(returned);
    return { status: "success" };
  } catch (thrown) {
    return { status: "error", error: toErrorRecord(thrown) };
  }
}

/** `$.context.run.runs`: which run of the step this is, 1 for the first. */
function runsOf(context: Json): number {
  const run = isBag(context) ? context.run : undefined;
  const runs = isBag(run) ? run.runs : undefined;
  return typeof runs === "number" && Number.isFinite(runs) ? runs : 1;
}

function define(target: Bag, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function limitError(name: string, message: string): Error {
  return Object.assign(new Error(message), { name });
}

/** The run's error texts, cut: a step may throw a message of any size. */
function cutError(error: ErrorRecord): ErrorRecord {
  const cut = (text: string) =>
    text.length > ERROR_TEXT_MAX_CHARS ? `${text.slice(0, ERROR_TEXT_MAX_CHARS)}... (cut)` : text;
  const record: ErrorRecord = { name: cut(error.name), message: cut(error.message), ts: error.ts };
  if (error.stack !== undefined) record.stack = cut(error.stack);
  return record;
}

/** What the whole run collected: sends, logs, the response, and the totals its limits count. */
class RunState {
  readonly sends: SendRecord[] = [];
  readonly logs: StepLogRecord[] = [];
  response: (HttpResponseSpec & { immediate?: boolean }) | undefined;
  /** Set when a step that asked to pause succeeded: the run ends there. */
  pause: WorkflowPause | undefined;
  /** A `$.respond` whose stream body is being read: it is the first call, and later ones are ignored. */
  responding = false;
  closed = false;
  exportBytes = 0;
  private logBytes = 0;
  private sendBytes = 0;
  private emits = 0;
  private emitBytes = 0;

  constructor(
    readonly invocation: WorkflowInvocation,
    /** Where the steps' `data_store` props' calls and `$.files` calls go (trusted code). */
    readonly dataStore?: DataStoreCaller,
  ) {}

  #files: Record<string, unknown> | undefined;

  /** `$.files`, made when a step first reads it. */
  get files(): Record<string, unknown> {
    this.#files ??= createFilesApi(this.dataStore);
    return this.#files;
  }

  log(step: string, level: LogLevel, message: string): void {
    if (this.logBytes >= LOG_MAX_BYTES) return;
    const bytes = Buffer.byteLength(message) + LOG_RECORD_OVERHEAD;
    if (this.logBytes + bytes > LOG_MAX_BYTES) {
      this.logBytes = LOG_MAX_BYTES;
      const note = `further logs were dropped: one run may log at most ${LOG_MAX_BYTES} bytes`;
      this.logs.push({ ts: Date.now(), level: "warn", message: note, step });
      return;
    }
    this.logBytes += bytes;
    this.logs.push({ ts: Date.now(), level, message, step });
  }

  /** Why `record` would go past a limit, or undefined; counts it when it fits. */
  admitSend(record: SendRecord): string | undefined {
    const { maxSends, maxSendBytes, maxEmits, maxEmitBytes } = this.invocation.limits;
    if (this.sends.length + 1 > maxSends) return `one run may send at most ${maxSends} times`;
    const bytes = jsonBytesWithin(record as unknown as Json, maxSendBytes - this.sendBytes);
    if (this.sendBytes + bytes > maxSendBytes) return `one run may send at most ${maxSendBytes} bytes`;
    if (record.type === "emit") {
      if (this.emits + 1 > maxEmits) return `one run may emit at most ${maxEmits} events`;
      if (this.emitBytes + bytes > maxEmitBytes) return `one run may emit at most ${maxEmitBytes} bytes of events`;
      this.emits += 1;
      this.emitBytes += bytes;
    }
    this.sendBytes += bytes;
    return undefined;
  }
}

/**
 * One step as it runs: the scope of its console lines, stray errors and `process.env.PD_COMPONENT`
 * (the workflow id), `this`'s bindings, and what its `$` records.
 */
class StepState implements InvocationScope, ThisBindings, StepEffects {
  readonly dbWrites: Record<string, Json> = {};
  readonly exports: Bag = {};
  readonly context: Json;
  exportBytes = 0;
  summary: string | undefined;
  closed = false;
  /** Set by the first of `$.flow.exit` and a failure the code could not catch; nothing after counts. */
  end: StepEnd | undefined;
  /** The last `$.flow.suspend`, `delay` or `rerun` call: the run pauses if the step succeeds. */
  pauseRequest: PauseRequest | undefined;
  private settle!: (end: StepEnd) => void;
  readonly stopped = new Promise<StepEnd>((resolve) => {
    this.settle = resolve;
  });

  constructor(
    private readonly run: RunState,
    private readonly step: WorkflowStepInvocation,
    deadline: number,
  ) {
    // A copy per step, so that no step's code changes what a later one reads. The context came as
    // JSON (a line from the host, a Lambda event), which toJson copies exactly; structuredClone
    // and a spread cost ten times as much, a third of a three-step run's CPU here.
    const context: { [key: string]: Json } = isBag(run.invocation.context)
      ? (toJson(run.invocation.context) as { [key: string]: Json })
      : {};
    context.deadline = deadline;
    // A rerun's count, context and callback are its own step's: the steps after it are not rerun.
    const { rerun } = run.invocation;
    if (rerun && step === run.invocation.steps[0]) {
      context.run = { ...(isBag(context.run) ? context.run : {}), ...(toJson(rerun) as { [key: string]: Json }) };
    }
    this.context = context;
  }

  get invocationId(): string {
    return this.run.invocation.invocationId;
  }

  get sourceId(): string {
    return this.run.invocation.workflowId;
  }

  get dataStore(): DataStoreCaller | undefined {
    return this.run.dataStore;
  }

  get files(): Record<string, unknown> {
    return this.run.files;
  }

  get props(): Record<string, Json> {
    return this.evaluatedProps ?? this.step.props;
  }

  /** The props with their expressions evaluated (values an expression gives need not be JSON). */
  private evaluatedProps: Record<string, Json> | undefined;

  async evaluateExpressions(steps: Bag): Promise<void> {
    const props = await evaluatePropExpressions(this.step.props, this.step.expressions, steps);
    this.evaluatedProps = props as Record<string, Json>;
  }

  get propTypes(): Record<string, string> {
    return this.step.propTypes;
  }

  get db(): Record<string, Json> {
    return this.step.db;
  }

  get allowPrivateAddresses(): boolean {
    return this.run.invocation.allowPrivateAddresses === true;
  }

  /** True once the step can change nothing more: it returned, failed, exited or timed out. */
  private get over(): boolean {
    return this.closed || this.end !== undefined || this.run.closed;
  }

  private stop(end: StepEnd): void {
    if (this.end !== undefined) return;
    this.end = end;
    this.settle(end);
  }

  log(level: LogLevel, message: string): void {
    if (!this.run.closed) this.run.log(this.step.id, level, message);
  }

  fail(thrown: unknown): void {
    if (!this.over) this.stop({ status: "error", error: toErrorRecord(thrown) });
  }

  /** Fails the step even when its code catches `error`: a limit ends the run. */
  private failWith(error: Error): never {
    this.fail(error);
    throw error;
  }

  emit(): never {
    throw new TypeError("an action cannot $emit; use $.send.emit");
  }

  export(name: string, value: unknown): void {
    this.keep(name, value, `$.export("${name.slice(0, 64)}")`);
    if (name === "$summary" && typeof value === "string" && !this.over)
      this.summary = value.slice(0, SUMMARY_MAX_CHARS);
  }

  recordReturn(value: unknown): void {
    this.keep("$return_value", value, "the step's return value");
  }

  /** Keeps `value` as JSON at `steps.<namespace>.<name>`, counted against the run's export bytes. */
  private keep(name: string, value: unknown, what: string): void {
    if (this.over) return;
    const json = toJson(value);
    const { maxExportBytes } = this.run.invocation.limits;
    // Counted, not stringified: a value of shared references may be far larger as text than in the heap.
    const bytes = json === undefined ? 0 : jsonBytesWithin(json, maxExportBytes - this.run.exportBytes);
    if (this.run.exportBytes + bytes > maxExportBytes) {
      this.failWith(limitError(EXPORT_LIMIT_ERROR, `${what}: one run may export at most ${maxExportBytes} bytes`));
    }
    this.run.exportBytes += bytes;
    this.exportBytes += bytes;
    define(this.exports, name, json);
  }

  respond(spec: unknown): Promise<void> {
    if (this.over) return Promise.resolve();
    if (!this.run.invocation.respondable) {
      this.log(
        "warn",
        this.run.invocation.standalone
          ? "$.respond was ignored: an action run on its own has no HTTP caller to answer"
          : "$.respond was ignored: this workflow's trigger does not return a custom response",
      );
      return Promise.resolve();
    }
    // The first call wins, as a source's respond; a bad one throws to the code and a later call may still answer.
    if (this.run.response || this.run.responding) return Promise.resolve();
    const immediate = isBag(spec) && spec.immediate === true;
    // A stream body (the original's Readable) is read first, so the respond must be awaited.
    if (immediate && isStreamBody(spec.body)) {
      throw new TypeError("$.respond: a stream body cannot be combined with immediate: true");
    }
    // A step that ended while its stream body was read (its code did not await the call) has no answer left to give.
    const read = answerRespond(
      spec,
      this.run,
      () => !this.over && !this.run.response,
      (response) => this.answer(response, immediate),
    );
    return read ?? Promise.resolve();
  }

  private answer(response: HttpResponseSpec & { immediate?: boolean }, immediate: boolean): void {
    if (immediate) response.immediate = true;
    this.run.response = response;
  }

  exit(reason: unknown): never {
    const text = typeof reason === "string" ? reason.slice(0, EXIT_REASON_MAX_CHARS) : undefined;
    if (!this.over) this.stop(text === undefined ? { status: "exited" } : { status: "exited", reason: text });
    throw flowExitError(text);
  }

  pause(request: PauseRequest): FlowUrls {
    const base = this.run.invocation.flow;
    if (!base) {
      const why = this.run.invocation.standalone
        ? STANDALONE_REFUSAL
        : this.run.invocation.respondable
          ? "a run that answers its HTTP caller (custom_response) cannot pause"
          : "this run cannot pause";
      throw Object.assign(new Error(`$.flow.${request.kind}: ${why}`), { name: NOT_IMPLEMENTED_ERROR });
    }
    const urls = { resume_url: `${base}/resume`, cancel_url: `${base}/cancel` };
    if (this.over) return urls;
    // Past its reruns, a step goes on to the next one (the original's `maxRetries`).
    const runs = runsOf(this.context);
    if (request.kind === "rerun" && runs > (request.maxReruns ?? 0)) this.pauseRequest = undefined;
    else this.pauseRequest = request;
    return urls;
  }

  send(record: SendRecord): void {
    if (this.run.invocation.standalone) {
      throw Object.assign(new Error(`$.send.${record.type}: ${STANDALONE_REFUSAL}`), { name: NOT_IMPLEMENTED_ERROR });
    }
    if (this.over) return;
    const over = this.run.admitSend(record);
    if (over !== undefined) {
      const name = record.type === "emit" && over.includes("emit") ? EMIT_LIMIT_ERROR : SEND_LIMIT_ERROR;
      this.failWith(
        limitError(name, `$.send.${record.type}: ${over}; the ${this.run.sends.length} sent before were kept`),
      );
    }
    this.run.sends.push(record);
  }
}

/** Why an action run on its own cannot send or pause. */
const STANDALONE_REFUSAL =
  "an action run on its own (the Connect run action) cannot send or pause: run it as a step of a workflow";

/**
 * The result of a run that failed as a whole with `error` (a host's kill, a crash, a malformed
 * answer): no step outcome, nothing sent. `WorkflowResult.error` belongs to no step.
 */
export function failedWorkflowResult(invocationId: string, error: ErrorRecord, durationMs: number): WorkflowResult {
  return { invocationId, steps: [], sends: [], logs: [], error, durationMs };
}
