/**
 * Running a deployed source and applying what the run did. The component runs in the host's
 * sandbox and only returns its effects; this trusted code orders and dedupes the emits, stores
 * them with the run's logs and error, merges the `$.service.db` writes and counts usage
 * (DESIGN.md decision 2). The emitter of every stored event is the source that was invoked, never
 * something the component said.
 */
import type { InvokeHandlers, SourceCode } from "#core/ports/component-host";
import type { Deps } from "#core/ports/deps";
import type { SourceRunJob } from "#core/ports/run-queue";
import type { SourceRunLease } from "#core/ports/source-run-lock";
import type {
  EmitRecord,
  ErrorRecord,
  Invocation,
  InvocationKind,
  InvocationResult,
  LogRecord,
} from "#runtime/protocol";
import { bindAccounts, maskCredentials, maskedError } from "./app-accounts.ts";
import { channelName } from "./channels.ts";
import { clipText } from "./clip-text.ts";
import {
  type ComponentRecord,
  ERRORS_CHANNEL,
  type Json,
  LOGS_CHANNEL,
  type NewEvent,
  type PropDescription,
  type SourceRecord,
  type SourceState,
  type StoredEvent,
} from "./component-model.ts";
import { bindDataStoreProps, runServices } from "./data-stores.ts";
import { applyDedupe, orderEmits } from "./dedupe.ts";
import { delayedEntriesOf, planDelayedEmits, splitDelayed } from "./delayed-emits.ts";
import { isDomainError } from "./errors.ts";
import { stampHops } from "./hops.ts";
import { DB_SERVICE, type InterfaceContext, isSealed, openSecretValues, runtimeProps } from "./props.ts";
import {
  creditsOf,
  firstNoticeIn,
  QUOTA_EXCEEDED_ERROR,
  type QuotaRefusal,
  runRefusal,
  storageRefusal,
} from "./quotas.ts";
import { redactPaths } from "./redact-paths.ts";
import { limitResult, mergeServiceDb, trustedDuration } from "./run-limits.ts";
import { isoTime, usageDay } from "./time.ts";
import { timerRunEvent } from "./timer-schedule.ts";

export type RunDeps = Pick<
  Deps,
  | "sources"
  | "components"
  | "files"
  | "events"
  | "bus"
  | "secrets"
  | "host"
  | "usage"
  | "clock"
  | "ids"
  | "log"
  | "runtime"
  | "quotas"
  | "runLock"
  | "dataStores"
  | "delayedEmits"
  | "appAccounts"
  | "apps"
  | "providers"
>;

/** Console lines kept per run on `$logs`; more are summarised in one last line. */
export const MAX_LOG_LINES_PER_RUN = 100;
/** Attempts to merge a run's state into the source's state when runs of one source overlap. */
const STATE_WRITE_ATTEMPTS = 5;

/** The HTTP endpoint of a source, or undefined for a source without an HTTP interface. */
export function endpointUrlOf(deps: Pick<Deps, "runtime">, source: SourceRecord): string | undefined {
  return source.endpointKey === undefined ? undefined : `${deps.runtime.publicUrl}/http/${source.endpointKey}`;
}

/** The prop set a source runs with: the component's, or the final set `additionalProps` made at deploy. */
export function propsOf(source: SourceRecord, component: ComponentRecord): PropDescription[] {
  return source.propDefinitions ?? component.metadata.props;
}

export function sourceCode(source: SourceRecord, component: ComponentRecord): SourceCode {
  return { sourceId: source.id, ownerId: source.workspaceId, code: component.code, codeHash: component.codeHash };
}

/**
 * What stores events: a source (`dc_`) or a workflow (`p_`), with its owner. A `SourceRecord` is one;
 * the emitter of every stored event is the thing that was invoked, never a field of a result.
 */
export interface Emitter {
  id: string;
  userId: string;
  workspaceId: string;
}

/** What one invocation did, after it was applied. */
export interface AppliedRun {
  result: InvocationResult;
  /** Events stored for the run: accepted emits, then its logs, then its error. */
  stored: StoredEvent[];
}

/**
 * How much longer than its time limit a run holds its source: the host's kill after the limit
 * (a second locally), a Lambda's overhead, and storing the run's effects. A run that outlives it
 * loses its db writes (see {@link invokeExclusive}).
 */
export const RUN_LEASE_MARGIN_MS = 15_000;

/** Whether runs of the source go one at a time: its component declares a `$.service.db` prop. */
export function runsOneAtATime(source: SourceRecord, component: ComponentRecord): boolean {
  return propsOf(source, component).some((prop) => prop.type === DB_SERVICE);
}

/**
 * Runs `kind` of a source's code and applies the result, for a caller that waits for it (a custom
 * response, a hook): the run ends within one time limit of this call, the wait for the source's
 * earlier runs included (see {@link invokeExclusive}), and by `answerByMs` when the caller must
 * answer by then (an AWS function answering a custom response before its own timeout). `hops`: the
 * webhook deliveries that led to this run (`#core/hops`), carried by every event it stores.
 */
export function invokeSource(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  kind: InvocationKind,
  event?: Json,
  handlers?: InvokeHandlers,
  hops = 0,
  answerByMs?: number,
): Promise<AppliedRun> {
  const limitUntilMs = deps.clock.nowMs() + deps.runtime.invocationTimeoutMs;
  const waitUntilMs = answerByMs === undefined ? limitUntilMs : Math.min(limitUntilMs, answerByMs);
  return invokeExclusive(deps, source, component, kind, event, handlers, waitUntilMs, hops, answerByMs);
}

/**
 * Asks a source's code a question and applies nothing: for `additionalProps` at deploy, before the
 * source exists or while its update may still be refused, and for the dynamic props endpoints.
 * What the code logs, emits or writes to `$.service.db` meanwhile is dropped; only the result is
 * read. No lock: nothing is written.
 *
 * `stores`: `"none"` (deploy) leaves `data_store` props unbound, as a probe must not create the
 * source's own stores before the source exists; `"configured"` (dynamic props) binds those
 * configured with a `ds_` id or `{"name"}` as a run does, their calls served as a run's (reads and
 * writes), and an unset one to nothing (its methods throw saying so).
 */
export async function probeSource(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  kind: InvocationKind,
  event?: Json,
  stores: "none" | "configured" = "none",
): Promise<InvocationResult> {
  const built = await buildInvocation(deps, source, component, kind, event, stores === "none" ? false : "configured");
  if (built.accountError) return failedBeforeRun(built.invocation, built.accountError);
  const handlers = withDataStores(deps, built.invocation, built.stores, undefined);
  const result = await deps.host.invoke(sourceCode(source, component), built.invocation, handlers);
  return maskResult(result, built.credentials);
}

/** The result of an invocation that did not run: `error` says why. */
function failedBeforeRun(invocation: Invocation, error: ErrorRecord): InvocationResult {
  return { invocationId: invocation.invocationId, emits: [], dbWrites: {}, logs: [], durationMs: 0, error };
}

/**
 * A run's result with the credentials of its accounts masked in its logs and error: they are
 * stored, logged and echoed to clients (docs/components.md "Accounts in components"). Emits and a
 * custom response are the component's own output and stay as they are.
 */
function maskResult(result: InvocationResult, credentials: readonly string[]): InvocationResult {
  if (credentials.length === 0) return result;
  const masked: InvocationResult = {
    ...result,
    logs: result.logs.map((log) => ({ ...log, message: maskCredentials(log.message, credentials) })),
  };
  if (result.error) masked.error = maskedError(result.error, credentials);
  return masked;
}

/**
 * Runs and applies, one run at a time for a source whose component declares `$.service.db`: the
 * run takes the source's lock before its state is read and lets go once its effects are stored,
 * so concurrent runs never both build on the same db (docs/components.md). Other sources run
 * concurrently, their db-less state merged by version (`mergeState`).
 *
 * With `waitUntilMs` (a caller waits), the time spent waiting is taken from the run's time limit,
 * and a run that cannot start before then ends at once with a `TimeoutError` recorded on `$errors`
 * (a custom response then answers as to any run out of time). Without it (a queued run), it waits
 * as long as the lock adapter does. The lease lasts the time limit plus {@link RUN_LEASE_MARGIN_MS},
 * so a run that never ends frees its source; if its lease ran out before its effects are stored,
 * its db writes are dropped with a warning, since a later run may have read and written the db.
 */
async function invokeExclusive(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  kind: InvocationKind,
  event: Json | undefined,
  handlers: InvokeHandlers | undefined,
  waitUntilMs: number | undefined,
  hops: number,
  answerByMs?: number,
): Promise<AppliedRun> {
  // Not waiting for a lock, the run keeps its whole limit unless the caller must answer sooner.
  if (!runsOneAtATime(source, component)) {
    return runAndApply(deps, source, component, kind, event, handlers, hops, undefined, answerByMs);
  }
  const limitMs = deps.runtime.invocationTimeoutMs;
  const lease = await deps.runLock.acquire(source.id, { leaseMs: limitMs + RUN_LEASE_MARGIN_MS, waitUntilMs });
  if (lease) {
    try {
      return await runAndApply(deps, source, component, kind, event, handlers, hops, { lease, waitUntilMs });
    } finally {
      // A lease that cannot be released now ends by itself: the run's outcome stands.
      await lease
        .release()
        .catch((error: unknown) =>
          deps.log.warn("a source's run lease could not be released", { source_id: source.id, error: String(error) }),
        );
    }
  }
  // A queued run (AWS): failing makes Lambda try it again later.
  if (waitUntilMs === undefined)
    throw new Error(`source ${source.id} stayed busy; its queued run is tried again later`);
  const { invocation, state } = await buildInvocation(deps, source, component, kind, event);
  const result: InvocationResult = {
    invocationId: invocation.invocationId,
    emits: [],
    dbWrites: {},
    logs: [],
    durationMs: 0,
    error: {
      name: "TimeoutError",
      message: `the run waited for the source's earlier runs past its time limit of ${limitMs / 1000}s and did not start (a source with $.service.db runs one run at a time)`,
      ts: deps.clock.nowMs(),
    },
  };
  return { result, stored: await applyResult(deps, source, component, invocation, result, state, 0, hops) };
}

/**
 * Builds the invocation (reading the source's state), runs it and applies its result. The run's
 * time limit ends by `waitUntilMs` (the caller's deadline; a `hold`'s by default), and under a
 * `hold` a run that outlived its lease has its db writes dropped.
 */
async function runAndApply(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  kind: InvocationKind,
  event: Json | undefined,
  handlers: InvokeHandlers | undefined,
  hops: number,
  hold?: { lease: SourceRunLease; waitUntilMs: number | undefined },
  waitUntilMs = hold?.waitUntilMs,
): Promise<AppliedRun> {
  const { invocation, state, stores, credentials, accountError } = await buildInvocation(
    deps,
    source,
    component,
    kind,
    event,
  );
  handlers = withDataStores(deps, invocation, stores, handlers);
  if (waitUntilMs !== undefined) {
    invocation.timeoutMs = Math.max(1, Math.min(invocation.timeoutMs, waitUntilMs - deps.clock.nowMs()));
  }
  const startedMs = deps.clock.nowMs();
  let result = accountError
    ? failedBeforeRun(invocation, accountError)
    : maskResult(await deps.host.invoke(sourceCode(source, component), invocation, handlers), credentials);
  const elapsedMs = deps.clock.nowMs() - startedMs;
  if (hold && !hold.lease.held() && Object.keys(result.dbWrites).length > 0) {
    const message = "this run outlived its hold on the source, so its $.service.db writes were dropped";
    result = { ...result, dbWrites: {}, logs: [...result.logs, warning(deps.clock.nowMs(), message)] };
  }
  const stored = await applyResult(deps, source, component, invocation, result, state, elapsedMs, hops);
  return { result, stored };
}

/** `handlers` and what serves the calls of the data stores bound to `invocation`'s props, if any. */
function withDataStores(
  deps: RunDeps,
  invocation: Invocation,
  stores: Set<string>,
  handlers: InvokeHandlers | undefined,
): InvokeHandlers | undefined {
  const services = runServices(deps, invocation, stores);
  return services ? { ...handlers, ...services } : handlers;
}

/** What the runtime needs to shape a source's interface props: its endpoint URL and timer. */
export function interfaceContext(deps: Pick<Deps, "runtime">, source: SourceRecord): InterfaceContext {
  const context: InterfaceContext = {};
  const endpointUrl = endpointUrlOf(deps, source);
  if (endpointUrl !== undefined) context.endpointUrl = endpointUrl;
  if (source.timer !== undefined) context.timer = source.timer;
  return context;
}

async function buildInvocation(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  kind: InvocationKind,
  event: Json | undefined,
  /** `"configured"`: only props configured with a store (see {@link probeSource}). */
  bindStores: boolean | "configured" = true,
): Promise<{
  invocation: Invocation;
  state: SourceState;
  stores: Set<string>;
  /** The credentials of its accounts, to mask in what the run stores. */
  credentials: string[];
  /** Why it cannot run: an account is gone ({@link bindAccounts}). */
  accountError?: ErrorRecord;
}> {
  const [values, state] = await Promise.all([
    openSecretValues(deps.secrets, source.configuredProps),
    deps.sources.getSourceState(source.id),
  ]);
  const defs = propsOf(source, component);
  const runtime = runtimeProps(defs, values, interfaceContext(deps, source));
  const { propTypes } = runtime;
  const stores = new Set<string>();
  const ownName = bindStores === "configured" ? undefined : source.id;
  // Read per invocation, so an account updated or deleted since deploy counts from the next one.
  const accounts = await bindAccounts(deps, source.workspaceId, defs, runtime.props, deps.runtime.invocationTimeoutMs);
  const props = bindStores
    ? await bindDataStoreProps(deps, source.workspaceId, ownName, accounts.props, propTypes, stores)
    : accounts.props;
  const invocation: Invocation = {
    invocationId: deps.ids.newSecret(12),
    kind,
    sourceId: source.id,
    props,
    propTypes,
    db: state.db,
    timeoutMs: deps.runtime.invocationTimeoutMs,
    limits: deps.runtime.emitLimits,
  };
  if (deps.runtime.allowPrivateAddresses === true) invocation.allowPrivateAddresses = true;
  if (event !== undefined) invocation.event = event;
  const built = { invocation, state, stores, credentials: accounts.credentials };
  return accounts.error ? { ...built, accountError: accounts.error } : built;
}

/**
 * Stores the effects of a run. `stateBefore` is the state the invocation was built from: the first
 * merge attempt writes on top of it, so a run of a source nobody else ran meanwhile reads its
 * state once. What the run returned is first checked against the limits (`run-limits.ts`): each
 * cut is stored as an `$errors` event. Over a storage quota, the run's emits and logs are not
 * stored (nor remembered by dedupe), only a rate-limited notice. Never throws for what the
 * component did; store failures do throw.
 */
async function applyResult(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  invocation: Invocation,
  result: InvocationResult,
  stateBefore: SourceState,
  elapsedMs: number,
  hops: number,
): Promise<StoredEvent[]> {
  // Deleted meanwhile: locally its runs in flight end then, as errors. Stored, the error would be
  // routed (to the workspace's `$errors` listeners) before the deletion removed it.
  if (result.error && deps.host.wasRemoved?.(source.id)) return [];
  const now = deps.clock.nowMs();
  const warnings: LogRecord[] = [];
  const limited = limitResult(result, deps.runtime.emitLimits, now);
  const problems = [...limited.problems];
  const overQuota =
    limited.emits.length > 0 || limited.logs.length > 0 || limited.error || problems.length > 0
      ? await storageRefusal(deps, source.workspaceId)
      : undefined;
  const ordered = overQuota ? [] : orderEmits(limited.emits);
  // Delayed emits wait on `$in` (delayed-emits.ts); where nothing can hold them (a composition
  // without a delayed emit store), they go now.
  const { immediate: emits, delayed } = deps.delayedEmits
    ? splitDelayed(ordered, now)
    : { immediate: ordered, delayed: [] };
  if (!deps.delayedEmits && ordered.some((emit) => emit.meta.delivery_ts !== undefined)) {
    warnings.push({
      ts: now,
      level: "warn",
      message: "delivery_ts is not scheduled here (no delayed emit store): emitted at once",
    });
  }
  const planned =
    delayed.length === 0 || !deps.delayedEmits
      ? undefined
      : planDelayedEmits(delayed, await deps.delayedEmits.countPending(source.id), now, () => deps.ids.newSecret(12));
  if (planned?.refusal) problems.push(planned.refusal);
  const accepted = await mergeState(
    deps,
    source,
    component,
    stateBefore,
    emits,
    result.dbWrites,
    warnings,
    problems,
    now,
  );

  // Serialised and measured once, by the limits check, for the store and the stored totals too.
  let emitBytes = 0;
  const events: NewEvent[] = accepted.map((emit) => {
    const measured = limited.measured.get(emit);
    emitBytes += measured?.storedBytes ?? 0;
    const event: NewEvent = {
      channel: channelName(emit.meta.name),
      event: emit.event ?? null,
      emitId: deps.ids.newSecret(12),
      meta: emit.meta,
    };
    if (measured) event.eventJson = measured.eventJson;
    return event;
  });
  // The rest (logs, errors) is measured here.
  if (planned) {
    events.push(...planned.inEvents);
    emitBytes += storedSize(planned.inEvents).bytes;
  }
  const others: NewEvent[] = [];
  for (const log of capLogs([...limited.logs, ...warnings])) {
    others.push({ channel: LOGS_CHANNEL, event: { ...log }, emitId: deps.ids.newSecret(12), meta: { ts: log.ts } });
  }
  if (limited.error) others.push(errorEvent(deps, source, invocation, limited.error));
  for (const problem of problems) others.push(errorEvent(deps, source, invocation, problem));
  const otherSize = storedSize(others);
  events.push(...others);
  stampHops(events, hops);
  // One line per run, however many emits it had refused (a run may make 1,000).
  const [firstRefusal] = warnings;
  if (firstRefusal) {
    deps.log.warn("source emit refused", {
      source_id: source.id,
      refused: warnings.length,
      reason: firstRefusal.message,
    });
  }
  for (const problem of problems) {
    deps.log.warn("source result over a limit", { source_id: source.id, error: problem.name, reason: problem.message });
  }
  if (limited.error) logRunFailure(deps, source, invocation, limited.error);

  const computeTimeMs = trustedDuration(result.durationMs, elapsedMs, invocation.timeoutMs);
  const [stored] = await Promise.all([
    overQuota
      ? noteQuotaRefusal(deps, source, overQuota, (error) => errorEvent(deps, source, invocation, error))
      : events.length === 0
        ? Promise.resolve([])
        : storeAndPublish(deps, source, events, now, {
            events: events.length,
            bytes: emitBytes + otherSize.bytes,
          }),
    deps.usage.addUsage(source.workspaceId, usageDay(now), {
      invocations: 1,
      computeTimeMs,
      credits: creditsOf(computeTimeMs),
    }),
  ]);
  // The `$in` copies are stored first, so a crash before this line leaves an `$in` event that is
  // never delivered rather than a delivery nobody can see or cancel.
  if (planned && planned.inEvents.length > 0) await deps.delayedEmits?.add(delayedEntriesOf(stored));
  return stored;
}

/**
 * Stores events and announces them on the bus, with the source's owner (its subscriptions are
 * found by it). The publish follows its own append directly (no other await in between), so a
 * source's publishes come in id order whenever its appends resolve in the order they were made
 * (SQLite appends do). The events are counted toward the workspace's stored totals as the append
 * starts (so a removal can never come before the count), and taken back if it fails. `size` is
 * {@link storedSize} of `events`, when the caller knows it already.
 */
export async function storeAndPublish(
  deps: Pick<RunDeps, "usage" | "events" | "bus">,
  source: Emitter,
  events: NewEvent[],
  now: number,
  size = storedSize(events),
) {
  const counted = deps.usage.addStored(source.workspaceId, source.id, now, size);
  let stored: StoredEvent[];
  try {
    stored = await deps.events.appendEvents(source.id, events, now);
  } catch (error) {
    await counted;
    await deps.usage.addStored(source.workspaceId, source.id, now, { events: -size.events, bytes: -size.bytes });
    throw error;
  }
  await deps.bus.publish(stored, { userId: source.userId, workspaceId: source.workspaceId });
  await counted;
  return stored;
}

/** What events add to the stored totals: their count and the UTF-8 bytes of their event and meta JSON. */
export function storedSize(events: NewEvent[]): { events: number; bytes: number } {
  let bytes = 0;
  for (const event of events) {
    bytes += Buffer.byteLength(JSON.stringify(event.event)) + Buffer.byteLength(JSON.stringify(event.meta));
  }
  return { events: events.length, bytes };
}

/** The `$errors` event of `error` for an emitter, in its own shape (a source's or a workflow's). */
export type ErrorEventOf = (error: ErrorRecord) => NewEvent;

/**
 * Whether the workspace may start a run of `emitter` now (`quotas.ts`); when it may not, the
 * refusal is noted on the emitter's `$errors` (once per quota and window) and returned, and the
 * caller runs nothing. `eventOf` shapes the notice; by default a source's error event.
 */
export async function admitRun(
  deps: RunDeps,
  emitter: Emitter,
  event: Json | undefined,
  eventOf: ErrorEventOf = (error) => errorEvent(deps, emitter, { kind: "run", event }, error),
): Promise<QuotaRefusal | undefined> {
  const refusal = await runRefusal(deps, emitter.workspaceId);
  if (refusal) await noteQuotaRefusal(deps, emitter, refusal, eventOf);
  return refusal;
}

/**
 * Stores a quota refusal on the emitter's `$errors` if it is the first of its quota, emitter and
 * window; the server log says it once then too. Later refusals in the window store nothing.
 */
export async function noteQuotaRefusal(
  deps: RunDeps,
  emitter: Emitter,
  refusal: QuotaRefusal,
  eventOf: ErrorEventOf,
): Promise<StoredEvent[]> {
  if (!(await firstNoticeIn(deps, emitter.id, refusal))) return [];
  const now = deps.clock.nowMs();
  deps.log.warn("workspace over a quota", { emitter_id: emitter.id, quota: refusal.quota, limit: refusal.limit });
  const error: ErrorRecord = { name: QUOTA_EXCEEDED_ERROR, message: `${refusal.quota}: ${refusal.message}`, ts: now };
  return storeAndPublish(deps, emitter, [eventOf(error)], now);
}

/**
 * Applies dedupe to the run's emits and merges its db writes into the source's state, retrying
 * when another run of the same source wrote in between (optimistic concurrency on the state's
 * version). Returns the emits that passed dedupe; refusals are added to `warnings`.
 */
async function mergeState(
  deps: RunDeps,
  source: SourceRecord,
  component: ComponentRecord,
  stateBefore: SourceState,
  emits: EmitRecord[],
  dbWrites: Record<string, Json>,
  warnings: LogRecord[],
  problems: ErrorRecord[],
  now: number,
): Promise<EmitRecord[]> {
  const strategy = component.metadata.dedupe;
  const writesDb = Object.keys(dbWrites).length > 0;
  for (let attempt = 1; ; attempt++) {
    // After a conflict another run wrote in between: merge onto what it wrote.
    const state = attempt === 1 ? stateBefore : await deps.sources.getSourceState(source.id);
    const deduped = applyDedupe(strategy, emits, state.dedupe);
    const changesDedupe = JSON.stringify(deduped.state) !== JSON.stringify(state.dedupe);
    // Duplicates are what dedupe is for and go unmentioned; an emit without an id is refused
    // loudly (real-behaviour.md §1.5: the original dropped those silently).
    const refusals = deduped.refused.filter((refusal) => refusal.kind === "missing_id");
    const notes = [...refusals.map((refusal) => refusal.reason), ...(deduped.warning ? [deduped.warning] : [])];
    if (!writesDb && !changesDedupe) {
      for (const note of notes) warnings.push(warning(now, note));
      return deduped.accepted;
    }
    // Checked on the db as it is now: runs of one source that overlap each see only their snapshot.
    const db = writesDb ? mergeServiceDb(state.db, dbWrites, now) : { db: state.db };
    try {
      await deps.sources.putSourceState(source.id, { db: db.db, dedupe: deduped.state }, state.version);
      for (const note of notes) warnings.push(warning(now, note));
      if (db.refused) problems.push(db.refused);
      return deduped.accepted;
    } catch (error) {
      if (!isDomainError(error) || error.code !== "conflict" || attempt >= STATE_WRITE_ATTEMPTS) throw error;
    }
  }
}

const warning = (ts: number, message: string): LogRecord => ({ ts, level: "warn", message });

/** Characters of a failed run's message in the server's log line (its `$errors` event keeps it whole). */
export const RUN_FAILURE_LOG_CHARS = 300;

/**
 * The server's line for a run or hook that failed, the same on both platforms. The message is the
 * component's own text: its secret props' values are masked (a component may quote them in what
 * it throws), the server's paths too, and it is cut short; the stack and the event are not logged.
 */
function logRunFailure(
  deps: Pick<Deps, "log">,
  source: SourceRecord,
  invocation: Invocation,
  error: ErrorRecord,
): void {
  const secrets: string[] = [];
  for (const [name, stored] of Object.entries(source.configuredProps)) {
    const value = invocation.props[name];
    if (isSealed(stored) && typeof value === "string" && value !== "") secrets.push(value);
  }
  const masked = (text: string) =>
    secrets.reduce((out, secret) => out.split(secret).join("[secret]"), redactPaths(text));
  deps.log.warn("source run failed", {
    source_id: source.id,
    invocation: invocation.kind,
    error: clipText(masked(error.name), 100),
    error_message: clipText(masked(error.message), RUN_FAILURE_LOG_CHARS),
  });
}

/** The lines a run keeps on `$logs`: at most {@link MAX_LOG_LINES_PER_RUN}, without the server's paths. */
export function capLogs(all: LogRecord[]): LogRecord[] {
  // A logged stack or `import.meta.url` names the sandbox's files by their paths on the server.
  const logs = all.map((log) => ({ ...log, message: redactPaths(log.message) }));
  if (logs.length <= MAX_LOG_LINES_PER_RUN) return logs;
  const kept = logs.slice(0, MAX_LOG_LINES_PER_RUN - 1);
  const last = logs[logs.length - 1] as LogRecord;
  kept.push(warning(last.ts, `${logs.length - kept.length} more log lines of this run were dropped`));
  return kept;
}

/**
 * An `$errors` event in the shape of rest-api.md "Event summary" (error summaries): `thrown` by
 * the invocation (or request) `origin` of `source`.
 */
export function errorEvent(
  deps: Pick<Deps, "ids">,
  source: Emitter,
  origin: Pick<Invocation, "kind" | "event">,
  thrown: ErrorRecord,
): NewEvent {
  // Stacks and messages name the sandbox's files by their paths on the server.
  const error = {
    ...thrown,
    message: redactPaths(thrown.message),
    ...(thrown.stack === undefined ? {} : { stack: redactPaths(thrown.stack) }),
  };
  const emitId = deps.ids.newSecret(12);
  return {
    channel: ERRORS_CHANNEL,
    emitId,
    meta: { ts: error.ts, summary: `${error.name}: ${error.message}`.slice(0, 200) },
    event: {
      original_event: origin.event ?? null,
      original_context: {
        id: emitId,
        ts: isoTime(error.ts),
        workflow_id: null,
        deployment_id: source.id,
        source_type: "COMPONENT",
        verified: false,
        owner_id: source.userId,
        platform_version: "sluice",
        invocation: origin.kind,
      },
      error: {
        code: error.name,
        cellId: origin.kind,
        ts: isoTime(error.ts),
        message: error.message,
        stack: error.stack ?? `${error.name}: ${error.message}`,
      },
    },
  };
}

/** Recently used components by id: components never change, so a cached one is never stale. */
const componentCache = new WeakMap<object, Map<string, ComponentRecord>>();
const COMPONENT_CACHE_SIZE = 500;

/** A component by id through a small per-store cache (the hot path of every HTTP event and timer). */
export async function loadComponent(
  deps: Pick<Deps, "components">,
  componentId: string,
): Promise<ComponentRecord | undefined> {
  let cache = componentCache.get(deps.components);
  if (!cache) {
    cache = new Map();
    componentCache.set(deps.components, cache);
  }
  const cached = cache.get(componentId);
  if (cached) return cached;
  const component = await deps.components.getComponent(componentId);
  if (component) {
    if (cache.size >= COMPONENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(componentId, component);
  }
  return component;
}

/** Runs a queued job (an HTTP event answered already, a subscription delivery). */
export async function runSource(deps: RunDeps, job: SourceRunJob): Promise<AppliedRun | undefined> {
  const source = await deps.sources.getSource(job.sourceId);
  if (!source?.active) return undefined;
  const component = await loadComponent(deps, source.componentId);
  if (!component) return undefined;
  // A queued HTTP request was admitted (and counted) when it arrived. Nobody waits for a queued
  // run: it waits for its source as long as the lock adapter does.
  if (job.trigger !== "http" && (await admitRun(deps, source, job.event))) return undefined;
  return invokeExclusive(deps, source, component, "run", job.event, undefined, undefined, job.hops ?? 0);
}

/** Runs a source's timer. A deleted, inactive or timer-less source is skipped. */
export async function fireTimer(
  deps: RunDeps,
  sourceId: string,
  scheduledAtMs: number,
): Promise<AppliedRun | undefined> {
  const source = await deps.sources.getSource(sourceId);
  if (!source?.active || source.timer === undefined) return undefined;
  const component = await loadComponent(deps, source.componentId);
  if (!component) return undefined;
  const event = timerRunEvent(source.timer, scheduledAtMs) as unknown as Json;
  if (await admitRun(deps, source, event)) return undefined;
  return invokeExclusive(deps, source, component, "run", event, undefined, undefined, 0);
}
