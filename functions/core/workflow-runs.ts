/**
 * Running a workflow and applying what the run did (docs/design/workflows.md 3.1, 3.5, 3.7). The
 * steps run in the host's sandbox, all in one invocation, and only their effects come back; this
 * trusted code checks the result, cuts it to the limits, queues its sends, stores its steps'
 * states and its events, and records the run (DESIGN.md decision 2). The emitter of every stored
 * event is the workflow that was invoked, never something the result says.
 *
 * Once only: every run has an id before it runs (`WorkflowRunJob.runId`), and
 * `WorkflowRunStore.beginRun` is the gate: a repeated job finds its run `done` and does nothing.
 */

import { createHash } from "node:crypto";
import type { WorkflowCode } from "#core/ports/component-host";
import type { Deps } from "#core/ports/deps";
import type { PausedRun } from "#core/ports/paused-runs";
import { RunBusyError, type WorkflowRunJob } from "#core/ports/run-queue";
import type { SourceRunLease } from "#core/ports/source-run-lock";
import type { StepState, StepStateWrite } from "#core/ports/workflow-store";
import type {
  ErrorRecord,
  HttpResponseSpec,
  WorkflowInvocation,
  WorkflowResult,
  WorkflowStepInvocation,
} from "#runtime/protocol";
import { requireWorkflow } from "./access.ts";
import { bindAccounts, maskCredentials, maskedError } from "./app-accounts.ts";
import { clipText } from "./clip-text.ts";
import { type ComponentRecord, ERRORS_CHANNEL, type Json, type NewEvent } from "./component-model.ts";
import { bindDataStoreProps, runServices } from "./data-stores.ts";
import { isDomainError } from "./errors.ts";
import { stampHops } from "./hops.ts";
import type { Caller } from "./identity.ts";
import { formatId } from "./ids.ts";
import { type PageQuery, pageEnvelope } from "./pagination.ts";
import { DB_SERVICE, expressionProps, isSealed, openSecretValues, runtimeProps } from "./props.ts";
import { creditsOf, storageRefusal } from "./quotas.ts";
import { mergeServiceDb, trustedDuration } from "./run-limits.ts";
import {
  admitRun,
  type Emitter,
  loadComponent,
  noteQuotaRefusal,
  RUN_LEASE_MARGIN_MS,
  storeAndPublish,
  storedSize,
} from "./source-runs.ts";
import { isoTime, usageDay } from "./time.ts";
import {
  checkWorkflowResult,
  type LimitedWorkflowResult,
  limitWorkflowResult,
  trustedError,
} from "./workflow-limits.ts";
import {
  type StepRunRecord,
  stepPropSet,
  type WorkflowRecord,
  type WorkflowRun,
  type WorkflowRunStatus,
} from "./workflow-model.ts";
import {
  type Continuation,
  countPausedBytes,
  effectOf,
  keepPause,
  newFlowBase,
  stepsKeyOf,
} from "./workflow-pauses.ts";
import { queueWorkflowSends } from "./workflow-sends.ts";

/** The channel of `$.send.sse` events: read by the workflow's live stream only. */
export const SSE_CHANNEL = "$sse";
/** The `$errors` event of sends the delivery queue refused. */
export const SEND_REFUSED_ERROR = "SendRefusedError";
/** Characters of the trigger event kept on a run record. */
export const RUN_EVENT_PREVIEW_CHARS = 1024;
/** Characters of a run record's error message (its `$errors` event keeps the whole text). */
const RUN_ERROR_MESSAGE_CHARS = 1024;
/** Attempts to write the steps' states when runs of one workflow overlap. */
const STATE_WRITE_ATTEMPTS = 5;

const SOURCE_TYPES = { http: "HTTP", timer: "TIMER", event: "EVENT" } as const;

/** What a run came to. */
export type WorkflowRunOutcome =
  /** The run had ended already (a repeated job): nothing was done. */
  | { outcome: "done" }
  /** The workflow was deleted while the run went: nothing of the run was stored, sent or routed. */
  | { outcome: "removed" }
  | {
      outcome: "ran";
      run: WorkflowRun;
      /** The response of `$.respond`, checked again; absent when none was given or it was refused. */
      response?: HttpResponseSpec;
      /** A response was given and refused (over a limit, malformed): its `$errors` says why. */
      responseRefused: boolean;
      /** Why the run failed, when it did. */
      error?: ErrorRecord;
    };

/** A random run id, for a run an HTTP request starts. */
export const newRunId = (deps: Pick<Deps, "ids">) => deps.ids.newId("run");

/**
 * A run id that is the same each time it is made from the same parts: a timer's tick
 * (`timerId`, its slot) or an event delivered to a workflow (workflow, emitter, event id). `atMs`
 * gives the id its time, so runs list in time order.
 */
export function runIdFor(atMs: number, ...parts: string[]): string {
  return formatId("run", atMs, createHash("sha256").update(parts.join("\n")).digest());
}

/** The workflow as an emitter of events. */
const emitterOf = (workflow: WorkflowRecord): Emitter => ({
  id: workflow.id,
  userId: workflow.userId,
  workspaceId: workflow.workspaceId,
});

/**
 * `$.context` of a run, without `deadline` (the runtime adds it): the original's fields where Sluice
 * has them (design 3.4). `source_type` is inferred from the trigger.
 */
export function workflowContext(
  workflow: WorkflowRecord,
  run: Pick<WorkflowRun, "id" | "attempts" | "startedAt" | "trigger">,
  continued?: Continuation,
): Json {
  return {
    // A continuation is the same execution as the run it goes on from.
    id: continued?.pause.originRunId ?? run.id,
    ts: isoTime(run.startedAt),
    workflow_id: workflow.id,
    deployment_id: workflow.deploymentId,
    source_type: SOURCE_TYPES[run.trigger.type],
    verified: false,
    owner_id: workflow.userId,
    platform_version: "sluice",
    JIT: false,
    run: { runs: 1, retry_count: run.attempts - 1 },
  };
}

/** A rerun continuation's `WorkflowInvocation.rerun`: the step's next run, its context, the request that resumed it. */
function rerunOf(continued: Continuation | undefined): WorkflowInvocation["rerun"] {
  if (continued?.pause.kind !== "rerun") return undefined;
  const rerun: NonNullable<WorkflowInvocation["rerun"]> = {
    runs: continued.pause.runs,
    context: continued.pause.state.context ?? null,
  };
  if (continued.dispatch.how === "resume" && continued.dispatch.request !== undefined) {
    rerun.callback_request = continued.dispatch.request;
  }
  return rerun;
}

/**
 * A workflow's `$errors` event (spec "Errors", design 2.5): the event that started the run, the
 * run's context, and the error with the `c_` of the step it belongs to (`cellId`; `""` when no step
 * is known, as when the host killed the process).
 */
export function workflowErrorEvent(
  deps: Pick<Deps, "ids">,
  originalEvent: Json,
  context: Json,
  thrown: ErrorRecord,
  cellId: string,
): NewEvent {
  const error = trustedError(thrown);
  return {
    channel: ERRORS_CHANNEL,
    emitId: deps.ids.newSecret(12),
    meta: { ts: error.ts, summary: `${error.name}: ${error.message}`.slice(0, 200) },
    event: {
      original_event: originalEvent,
      original_context: context,
      error: {
        code: error.name,
        cellId,
        ts: isoTime(error.ts),
        message: error.message,
        stack: error.stack ?? `${error.name}: ${error.message}`,
      },
    },
  };
}

/** The `$errors` event of a notice about a job that did not start (a quota): the context a run would have had. */
function noticeEventOf(deps: Pick<Deps, "ids">, workflow: WorkflowRecord, job: WorkflowRunJob, now: number) {
  // Built only for a refusal: every run is admitted through here.
  return (error: ErrorRecord) => {
    const context = workflowContext(workflow, {
      id: job.runId,
      attempts: 1,
      startedAt: now,
      trigger: { type: job.trigger, id: job.triggerId },
    });
    return workflowErrorEvent(deps, job.event, context, error, "");
  };
}

/**
 * Whether the workspace may start a run of `workflow` now; a refusal is noted once per window on the
 * workflow's `$errors` (decision 99) and returned.
 */
export function admitWorkflowRun(deps: Deps, workflow: WorkflowRecord, job: WorkflowRunJob) {
  return admitRun(deps, emitterOf(workflow), job.event, noticeEventOf(deps, workflow, job, deps.clock.nowMs()));
}

/**
 * Runs a queued job (an HTTP request answered already, a timer tick, an event). A deleted or
 * inactive workflow's job is dropped (design 3.8); a timer or event run is admitted against the
 * quotas here (an HTTP one was, on arrival). Throws {@link RunBusyError} when another runner holds
 * the run.
 */
export async function runWorkflow(deps: Deps, job: WorkflowRunJob): Promise<WorkflowRunOutcome | undefined> {
  if (job.resume) return continuePausedRun(deps, job, job.resume.pauseId);
  const workflow = await deps.workflows.getWorkflow(job.workflowId);
  if (!workflow?.active) {
    deps.log.debug("a run of a deleted or inactive workflow was dropped", {
      workflow_id: job.workflowId,
      run_id: job.runId,
    });
    return undefined;
  }
  if (job.trigger !== "http" && (await admitWorkflowRun(deps, workflow, job))) return undefined;
  return executeRun(deps, workflow, job, false, undefined);
}

/**
 * The continuation of a paused run (`#core/workflow-pauses`): the pause's steps left run from what
 * it kept, or (cancelled) a record says it ended; then the pause is forgotten. A pause that is gone
 * (its continuation ended already, its workflow deleted) or not taken does nothing; one of an
 * inactive workflow is dropped.
 */
async function continuePausedRun(
  deps: Deps,
  queued: WorkflowRunJob,
  pauseId: string,
): Promise<WorkflowRunOutcome | undefined> {
  const pause = await deps.pausedRuns.get(pauseId);
  if (!pause?.dispatch) {
    deps.log.debug("a paused run's continuation found no taken pause", {
      workflow_id: queued.workflowId,
      run_id: pauseId,
    });
    return undefined;
  }
  const continued: Continuation = { pause, dispatch: pause.dispatch };
  const job: WorkflowRunJob = { ...queued, event: pause.state.event };
  const workflow = await deps.workflows.getWorkflow(pause.workflowId);
  if (!workflow) {
    // A deleted workflow's pauses were taken from its workspace's stored bytes by the deletion.
    deps.log.info("a paused run of a deleted workflow was dropped", {
      workflow_id: pause.workflowId,
      run_id: pause.id,
    });
    await deps.pausedRuns.remove(pause.id);
    return undefined;
  }
  let outcome: WorkflowRunOutcome | undefined;
  if (!workflow.active) {
    // Made inactive since it was taken (its URLs refuse while it is): the run ends, on the record.
    outcome = await recordCancelled(deps, workflow, job, continued, "inactive");
  } else if (effectOf(pause, pause.dispatch) === "cancel") {
    outcome = await recordCancelled(
      deps,
      workflow,
      job,
      continued,
      continued.dispatch.how === "cancel" ? "cancel_url" : "timeout",
    );
  } else {
    const refusal = await admitWorkflowRun(deps, workflow, job);
    if (refusal) {
      // The pause is kept, taken: its continuation runs once the quota's window has passed. Local
      // mode's sweep leaves it alone until then, so that it is not queued again meanwhile.
      const retryAtMs = refusal.windowStartMs + refusal.windowMs;
      await deps.pausedRuns.touch(pause.id, retryAtMs);
      throw new RunBusyError(
        retryAtMs,
        `the continuation of run ${pause.id} of workflow ${workflow.id} waits for the workspace's ${refusal.quota} quota until ${isoTime(retryAtMs)}`,
      );
    }
    outcome = await executeRun(deps, workflow, job, false, undefined, undefined, continued);
  }
  // Ended (or done before): the pause has nothing more to give.
  await forgetPause(deps, workflow, pause);
  return outcome;
}

/** Forgets a pause whose continuation ended, and takes what it kept from the workspace's stored bytes. */
async function forgetPause(deps: Deps, workflow: Pick<WorkflowRecord, "id" | "workspaceId">, pause: PausedRun) {
  // Only the removal that removed it takes its bytes back (two copies of a continuation may end).
  if (!(await deps.pausedRuns.remove(pause.id))) return;
  await countPausedBytes(deps, workflow, -(pause.stateBytes ?? 0), deps.clock.nowMs());
}

/** The record of a paused run's cancellation: its cancel URL, or a suspension whose time ran out. */
async function recordCancelled(
  deps: Deps,
  workflow: WorkflowRecord,
  job: WorkflowRunJob,
  continued: Continuation,
  cancelReason: NonNullable<WorkflowRun["cancelReason"]>,
): Promise<WorkflowRunOutcome> {
  const now = deps.clock.nowMs();
  const begun = await deps.workflowRuns.beginRun(
    {
      ...newRunRecord(workflow, job, now, deps.runtime.invocationTimeoutMs),
      resumedFrom: continued.pause.id,
    },
    now,
    { rerunnable: true },
  );
  if (begun.outcome === "done") return { outcome: "done" };
  if (begun.outcome === "busy") {
    throw new RunBusyError(
      begun.leaseUntilMs + 1,
      `run ${job.runId} of workflow ${workflow.id} is held by another runner`,
    );
  }
  const finished: WorkflowRun = {
    ...begun.run,
    status: "cancelled",
    cancelReason,
    endedAt: now,
    durationMs: 0,
  };
  await deps.workflowRuns.finishRun(finished);
  deps.log.info("paused workflow run cancelled", {
    workflow_id: workflow.id,
    run_id: continued.pause.id,
    reason: cancelReason,
  });
  return { outcome: "ran", run: finished, responseRefused: false };
}

/** A run's record as it begins. */
function newRunRecord(workflow: WorkflowRecord, job: WorkflowRunJob, now: number, limitMs: number): WorkflowRun {
  return {
    id: job.runId,
    workflowId: workflow.id,
    deploymentId: workflow.deploymentId,
    trigger: { type: job.trigger, id: job.triggerId },
    status: "running",
    leaseUntilMs: now + limitMs + RUN_LEASE_MARGIN_MS,
    attempts: 1,
    startedAt: now,
    eventPreview: eventPreview(job.event),
    steps: [],
    logs: [],
  };
}

/**
 * Runs an HTTP request's job while its caller waits (a `custom_response` trigger): the run ends
 * within one time limit of this call, the wait for the workflow's earlier runs included, and by
 * `answerByMs` when the caller must answer by then (see `receiveHttpRequest`).
 */
export function runWorkflowNow(
  deps: Deps,
  workflow: WorkflowRecord,
  job: WorkflowRunJob,
  answerByMs?: number,
): Promise<WorkflowRunOutcome> {
  const limitUntilMs = deps.clock.nowMs() + deps.runtime.invocationTimeoutMs;
  return executeRun(deps, workflow, job, true, Math.min(limitUntilMs, answerByMs ?? limitUntilMs), answerByMs);
}

interface LoadedStep {
  step: WorkflowRecord["steps"][number];
  component: ComponentRecord;
}

/** Whether runs of the workflow go one at a time: one of its enabled steps has a `$.service.db` prop. */
const usesDb = (steps: LoadedStep[]) =>
  steps.some(({ component }) => component.metadata.props.some((prop) => prop.type === DB_SERVICE));

async function executeRun(
  deps: Deps,
  workflow: WorkflowRecord,
  job: WorkflowRunJob,
  respondable: boolean,
  waitUntilMs: number | undefined,
  answerByMs?: number,
  continued?: Continuation,
): Promise<WorkflowRunOutcome> {
  const loaded: LoadedStep[] = await Promise.all(
    workflow.steps.map(async (step) => {
      const component = await loadComponent(deps, step.componentId);
      if (!component) throw new Error(`workflow ${workflow.id}: step ${step.id} names a missing component`);
      return { step, component };
    }),
  );
  const enabled = loaded.filter(({ step }) => !step.disabled);
  const limitMs = deps.runtime.invocationTimeoutMs;
  // Not waiting for a lock, the run keeps its whole limit unless the caller must answer sooner.
  if (!usesDb(enabled)) return beginAndRun(deps, workflow, loaded, job, respondable, undefined, answerByMs, continued);
  // As a source with `$.service.db` (decision 84): the lock is taken before the run is begun, so the
  // run's lease counts from when it can really start.
  const lease = await deps.runLock.acquire(workflow.id, { leaseMs: limitMs + RUN_LEASE_MARGIN_MS, waitUntilMs });
  if (!lease) {
    if (waitUntilMs === undefined)
      throw new Error(`workflow ${workflow.id} stayed busy; its queued run is tried again later`);
    return beginAndRun(
      deps,
      workflow,
      loaded,
      job,
      respondable,
      { lease: undefined, waitUntilMs },
      waitUntilMs,
      continued,
    );
  }
  try {
    return await beginAndRun(deps, workflow, loaded, job, respondable, { lease, waitUntilMs }, waitUntilMs, continued);
  } finally {
    await lease.release().catch((error: unknown) =>
      deps.log.warn("a workflow's run lease could not be released", {
        workflow_id: workflow.id,
        error: String(error),
      }),
    );
  }
}

/** A run held under the workflow's lock; `lease` undefined: the lock was not had before `waitUntilMs`. */
interface Hold {
  lease: SourceRunLease | undefined;
  waitUntilMs: number | undefined;
}

async function beginAndRun(
  deps: Deps,
  workflow: WorkflowRecord,
  loaded: LoadedStep[],
  job: WorkflowRunJob,
  respondable: boolean,
  hold: Hold | undefined,
  waitUntilMs = hold?.waitUntilMs,
  continued?: Continuation,
): Promise<WorkflowRunOutcome> {
  const now = deps.clock.nowMs();
  const limitMs = deps.runtime.invocationTimeoutMs;
  const record = newRunRecord(workflow, job, now, limitMs);
  if (continued) record.resumedFrom = continued.pause.id;
  const begun = await deps.workflowRuns.beginRun(
    record,
    now,
    // A queued run's job runs again after a crash; a custom-response run is never queued.
    { rerunnable: !respondable },
  );
  if (begun.outcome === "done") return { outcome: "done" };
  if (begun.outcome === "busy") {
    throw new RunBusyError(
      begun.leaseUntilMs + 1,
      `run ${job.runId} of workflow ${workflow.id} is held by another runner until ${isoTime(begun.leaseUntilMs)}`,
    );
  }
  const run = begun.run;
  const enabled = loaded.filter(({ step }) => !step.disabled);
  const states = hold ? await deps.workflows.getStepStates(workflow.id) : {};
  const stores = new Set<string>();
  const { invocation, credentials, accountError } = await buildInvocation(
    deps,
    workflow,
    enabled,
    job,
    run,
    respondable,
    states,
    stores,
    continued,
  );
  if (waitUntilMs !== undefined) {
    invocation.timeoutMs = Math.max(1, Math.min(invocation.timeoutMs, waitUntilMs - deps.clock.nowMs()));
  }
  // The steps' key is hashed only when a run pauses or goes on from a pause.
  const stepsKey = () => stepsKeyOf(loaded);
  const notResumable = continued ? resumeRefusal(stepsKey(), invocation, continued, deps.clock.nowMs()) : undefined;
  if ((hold && hold.lease === undefined) || accountError || notResumable) {
    // The lock was not had in time (the run fails as out of time), an account is gone, or the
    // paused run's steps changed: no step runs.
    const error: ErrorRecord = notResumable ??
      accountError ?? {
        name: "TimeoutError",
        message: `the run waited for the workflow's earlier runs past its time limit of ${limitMs / 1000}s and did not start (a workflow with $.service.db runs one run at a time)`,
        ts: deps.clock.nowMs(),
      };
    const result: WorkflowResult = {
      invocationId: invocation.invocationId,
      steps: [],
      sends: [],
      logs: [],
      error,
      durationMs: 0,
    };
    return applyWorkflowResult(deps, workflow, job, run, invocation, result, states, 0, [], continued, stepsKey);
  }
  const startedMs = deps.clock.nowMs();
  // Every run reaches its project's File Store (`$.files`), and the data stores its props bound.
  const handlers = runServices(deps, invocation, stores, {
    projectId: workflow.projectId,
    components: enabled.map(({ component }) => component),
  });
  const raw = await deps.host.invokeWorkflow(deploymentCode(deps, workflow, loaded), invocation, handlers);
  const elapsedMs = deps.clock.nowMs() - startedMs;
  let result = raw;
  if (hold?.lease && !hold.lease.held()) {
    // A later run may have read and written the steps' states meanwhile.
    result = dropDbWrites(raw, deps.clock.nowMs());
  }
  return applyWorkflowResult(
    deps,
    workflow,
    job,
    run,
    invocation,
    result,
    states,
    elapsedMs,
    credentials,
    continued,
    stepsKey,
  );
}

/** Why a paused run cannot go on in `workflow` as it is now: its steps changed meanwhile. */
function resumeRefusal(
  stepsKey: string,
  invocation: WorkflowInvocation,
  continued: Continuation,
  now: number,
): ErrorRecord | undefined {
  if (continued.pause.stepsKey === stepsKey && invocation.resume) return undefined;
  return {
    name: "ResumeError",
    message: `the run paused at step ${continued.pause.stepId} cannot go on: the workflow's steps were changed while it was paused`,
    ts: now,
  };
}

/**
 * The code a host runs for a workflow's deployment: one module per distinct component of its
 * steps, disabled ones included. The one copy: runs build it from the components they loaded,
 * create and PUT (`workflows.ts`) from the ones they saved.
 */
export function workflowCode(workflow: WorkflowRecord, loaded: { component: ComponentRecord }[]): WorkflowCode {
  const modules = new Map<string, string>();
  for (const { component } of loaded) modules.set(component.codeHash, component.code);
  return {
    workflowId: workflow.id,
    ownerId: workflow.workspaceId,
    deploymentId: workflow.deploymentId,
    steps: [...modules].map(([codeHash, code]) => ({ codeHash, code })),
  };
}

/** The code of recent deployments, by `workflowId:deploymentId`, per host. */
const deploymentCodeCache = new WeakMap<object, Map<string, WorkflowCode>>();
const DEPLOYMENT_CODE_CACHE_SIZE = 500;

/**
 * {@link workflowCode}, the same object for every run of a deployment while its components are
 * the same (their code hashes are compared on every run): the host keeps what it derives from the
 * object (local mode: the step set's hash and its bundles) and skips doing it again per run.
 */
function deploymentCode(deps: Deps, workflow: WorkflowRecord, loaded: { component: ComponentRecord }[]): WorkflowCode {
  const key = `${workflow.id}:${workflow.deploymentId}`;
  const cached = deploymentCodeCache.get(deps.host)?.get(key);
  const fresh = workflowCode(workflow, loaded);
  if (cached && sameSteps(cached, fresh)) return cached;
  return remember(deploymentCodeCache, deps.host, key, fresh, DEPLOYMENT_CODE_CACHE_SIZE);
}

/** Keeps `value` under `key` in `owner`'s map of `caches`, dropping the oldest entry past `max`. */
function remember<T>(caches: WeakMap<object, Map<string, T>>, owner: object, key: string, value: T, max: number): T {
  let cache = caches.get(owner);
  if (!cache) {
    cache = new Map();
    caches.set(owner, cache);
  }
  if (cache.size >= max) cache.delete(cache.keys().next().value as string);
  cache.set(key, value);
  return value;
}

const sameSteps = (a: WorkflowCode, b: WorkflowCode) =>
  a.ownerId === b.ownerId &&
  a.steps.length === b.steps.length &&
  a.steps.every((step, index) => step.codeHash === b.steps[index]?.codeHash);

function dropDbWrites(raw: WorkflowResult, now: number): WorkflowResult {
  if (!Array.isArray(raw?.steps) || !raw.steps.some((step) => Object.keys(step?.dbWrites ?? {}).length > 0)) return raw;
  const message = "this run outlived its hold on the workflow, so its $.service.db writes were dropped";
  const last = raw.steps[raw.steps.length - 1];
  return {
    ...raw,
    steps: raw.steps.map((step) => ({ ...step, dbWrites: {} })),
    logs: [...(Array.isArray(raw.logs) ? raw.logs : []), { ts: now, level: "warn", message, step: last?.id ?? "" }],
  };
}

/** The steps' props of a deployment without secret props, by `workflowId:deploymentId`, per store. */
const stepPropsCache = new WeakMap<object, Map<string, StepProps[]>>();
const STEP_PROPS_CACHE_SIZE = 500;

type StepProps = Pick<WorkflowStepInvocation, "props" | "propTypes" | "expressions">;

/**
 * What each enabled step's props are at run time. A deployment's props never change (a change of
 * steps is a new `deploymentId`), so those of a deployment without secrets are built once and
 * reused (design 3.9); secrets are opened on every run, as a source's are, never kept in memory.
 */
async function stepPropsOf(deps: Deps, workflow: WorkflowRecord, enabled: LoadedStep[]): Promise<StepProps[]> {
  const key = `${workflow.id}:${workflow.deploymentId}`;
  const cached = stepPropsCache.get(deps.workflows)?.get(key);
  if (cached && cached.length === enabled.length) return cached;
  const built = await Promise.all(
    enabled.map(async ({ step, component }): Promise<StepProps> => {
      const defs = stepPropSet(step, component);
      const run = runtimeProps(defs, await openSecretValues(deps.secrets, step.configuredProps), {});
      // Which props' `{{ ... }}` expressions the runtime evaluates: never a secret's or a static's.
      const expressions = expressionProps(defs, run.props);
      return expressions ? { ...run, expressions } : run;
    }),
  );
  if (enabled.some(({ step }) => Object.values(step.configuredProps).some(isSealed))) return built;
  return remember(stepPropsCache, deps.workflows, key, built, STEP_PROPS_CACHE_SIZE);
}

async function buildInvocation(
  deps: Deps,
  workflow: WorkflowRecord,
  enabled: LoadedStep[],
  job: WorkflowRunJob,
  run: WorkflowRun,
  respondable: boolean,
  states: Record<string, StepState>,
  stores: Set<string>,
  continued?: Continuation,
): Promise<{ invocation: WorkflowInvocation; credentials: string[]; accountError?: ErrorRecord }> {
  const stepProps = await stepPropsOf(deps, workflow, enabled);
  const credentials: string[] = [];
  const accountErrors: ErrorRecord[] = [];
  // A continuation runs the steps after its pause (a rerun: from the step that paused).
  const from = continued ? resumeIndex(enabled, continued) : 0;
  const steps = await Promise.all(
    enabled.slice(Math.max(0, from)).map(async ({ step, component }, offset): Promise<WorkflowStepInvocation> => {
      const index = Math.max(0, from) + offset;
      const { props, propTypes, expressions } = stepProps[index] as StepProps;
      // Bound per run, after the cache: an account may be updated or deleted, a store created or
      // deleted, between runs.
      const accounts = await bindAccounts(
        deps,
        workflow.workspaceId,
        stepPropSet(step, component),
        props,
        deps.runtime.invocationTimeoutMs,
        (prop) => `the step "${step.namespace}"'s prop "${prop}"`,
      );
      credentials.push(...accounts.credentials);
      if (accounts.error) accountErrors.push(accounts.error);
      return {
        id: step.id,
        namespace: step.namespace,
        module: component.codeHash,
        props: await bindDataStoreProps(deps, workflow.workspaceId, step.id, accounts.props, propTypes, stores),
        propTypes,
        ...(expressions ? { expressions } : {}),
        db: states[step.id]?.db ?? {},
      };
    }),
  );
  const context = workflowContext(workflow, run, continued);
  const invocation: WorkflowInvocation = {
    invocationId: deps.ids.newSecret(12),
    kind: "workflow",
    workflowId: workflow.id,
    // `steps.trigger.context` is the run's context: sent once, the runtime copies it.
    trigger: { event: job.event },
    context,
    steps,
    respondable,
    timeoutMs: deps.runtime.invocationTimeoutMs,
    limits: { ...deps.runtime.emitLimits, ...deps.runtime.workflowLimits },
    ...(deps.runtime.allowPrivateAddresses === true ? { allowPrivateAddresses: true } : {}),
    // A run that answers its caller cannot pause: the caller cannot wait for days.
    ...(respondable ? {} : { flow: newFlowBase(deps, run.id) }),
  };
  if (continued && from >= 0) invocation.resume = { steps: resumedSteps(continued) };
  const rerun = rerunOf(continued);
  if (rerun && from >= 0) invocation.rerun = rerun;
  const [first, ...others] = accountErrors;
  if (!first) return { invocation, credentials };
  const message = [first, ...others].map((error) => error.message).join("; ");
  return { invocation, credentials, accountError: { ...first, message } };
}

/** Where a continuation starts among the enabled steps; -1 when its step is not one of them. */
function resumeIndex(enabled: LoadedStep[], continued: Continuation): number {
  const at = enabled.findIndex(({ step }) => step.id === continued.pause.stepId);
  if (at < 0) return -1;
  return continued.pause.kind === "rerun" ? at : at + 1;
}

/**
 * `steps.<namespace>` of the steps before a continuation: as the pause kept them, and a resumed
 * suspension or delay with what its resume URL was sent as `$resume_data` on the step that paused
 * (the request's body; its query when it has none).
 */
function resumedSteps(continued: Continuation): Record<string, Json> {
  const { pause, dispatch } = continued;
  const steps = { ...pause.state.steps };
  if (pause.kind === "rerun" || dispatch.how !== "resume") return steps;
  const request = dispatch.request as { body?: Json; query?: Json } | undefined;
  const data = request?.body !== undefined ? request.body : (request?.query ?? null);
  const own = steps[pause.stepNamespace];
  const exports = typeof own === "object" && own !== null && !Array.isArray(own) ? own : {};
  Object.defineProperty(steps, pause.stepNamespace, {
    value: { ...exports, $resume_data: data },
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return steps;
}

/**
 * Applies a run's result in the order of design 3.5: checked (a forged or inconsistent result is
 * dropped whole, the run failing with a `SandboxError`), cut to the limits, sends queued, steps'
 * states stored, events stored in one append, then the run record and usage. Never throws for what
 * the steps did; store failures do throw (the job then runs again, under the same run id).
 */
export async function applyWorkflowResult(
  deps: Deps,
  workflow: WorkflowRecord,
  job: WorkflowRunJob,
  run: WorkflowRun,
  invocation: WorkflowInvocation,
  raw: WorkflowResult,
  statesBefore: Record<string, StepState>,
  elapsedMs: number,
  credentials: readonly string[] = [],
  continued?: Continuation,
  /** The workflow's steps' key (`stepsKeyOf`), for a run that pauses. */
  stepsKey: () => string = () => "",
): Promise<WorkflowRunOutcome> {
  // Deleted meanwhile: locally its runs in flight end then, as errors. Stored, the error would be
  // routed (to the workspace's `$errors` listeners) before the deletion removed it.
  if (raw.error && deps.host.wasRemoved?.(workflow.id)) return { outcome: "removed" };
  const now = deps.clock.nowMs();
  const emitter = emitterOf(workflow);
  const checked = checkWorkflowResult(raw, invocation, now);
  const result: WorkflowResult = checked.ok
    ? maskWorkflowResult(checked.result, credentials)
    : { invocationId: invocation.invocationId, steps: [], sends: [], logs: [], error: checked.error, durationMs: 0 };
  const limited: LimitedWorkflowResult = checked.ok
    ? limitWorkflowResult(result, invocation.limits, now)
    : { emits: [], sse: [], delivered: [], logs: [], responseRefused: false, problems: [] };
  // A cut belongs to the step the run ended in: the runtime fails the step that makes the call past a limit.
  const lastStepId = result.steps[result.steps.length - 1]?.id ?? "";
  const problems = limited.problems.map((error) => ({ error, cellId: lastStepId }));

  // 3. Sends first: their delivery ids come from the run id, so a run applied again queues nothing new.
  if (limited.delivered.length > 0) {
    const refusals = await queueWorkflowSends(
      deps,
      emitter,
      run.id,
      limited.delivered.map((kept) => kept.send),
      now,
      job.hops ?? 0,
    );
    if (refusals.length > 0) {
      const shown = refusals
        .slice(0, 3)
        .map((refusal) => `send ${limited.delivered[refusal.index]?.index}: ${refusal.reason}`);
      const message = `${refusals.length} sends were not queued: ${shown.join("; ")}${refusals.length > 3 ? "; ..." : ""}`;
      problems.push({ error: { name: SEND_REFUSED_ERROR, message, ts: now }, cellId: lastStepId });
    }
  }

  // 4. The steps' states.
  const dbWrites = result.steps.filter((step) => Object.keys(step.dbWrites).length > 0);
  if (dbWrites.length > 0) {
    for (const refused of await mergeStepStates(deps, workflow.id, statesBefore, dbWrites, now)) problems.push(refused);
  }

  // 5. The pause, before the record: a crash between them does the run again, which pauses again
  // under the same id. One that cannot be kept fails the run.
  let paused = result.pause !== undefined && invocation.flow !== undefined && runFailure(result) === undefined;
  if (paused && result.pause && invocation.flow) {
    const refused = await keepPause(
      deps,
      workflow,
      job,
      run,
      invocation.flow,
      result.pause,
      continued,
      stepsKey(),
      now,
    );
    if (refused) {
      paused = false;
      const lastStep = result.steps[result.steps.length - 1];
      if (lastStep) {
        result.steps[result.steps.length - 1] = { ...lastStep, status: "error", error: refused };
      }
    }
  }

  // 6. Events, in one append.
  const failed = runFailure(result);
  const context = invocation.context;
  const events: NewEvent[] = [];
  for (const emit of limited.emits) {
    events.push({
      channel: "",
      event: { raw_event: emit.rawEvent },
      emitId: deps.ids.newSecret(12),
      meta: { ts: now },
    });
  }
  for (const sse of limited.sse) {
    events.push({
      channel: SSE_CHANNEL,
      event: sse.payload,
      emitId: deps.ids.newSecret(12),
      meta: { ts: now, name: sse.channel },
    });
  }
  if (failed) events.push(workflowErrorEvent(deps, job.event, context, failed.error, failed.cellId));
  for (const problem of problems)
    events.push(workflowErrorEvent(deps, job.event, context, problem.error, problem.cellId));
  stampHops(events, job.hops ?? 0);
  if (failed) {
    deps.log.warn("workflow run failed", {
      workflow_id: workflow.id,
      run_id: run.id,
      error: clipText(failed.error.name, 100),
      cell_id: failed.cellId,
    });
  }
  for (const problem of problems) {
    deps.log.warn("workflow run over a limit", { workflow_id: workflow.id, run_id: run.id, error: problem.error.name });
  }
  const overQuota = events.length > 0 ? await storageRefusal(deps, workflow.workspaceId) : undefined;
  const computeTimeMs = trustedDuration(result.durationMs, elapsedMs, invocation.timeoutMs);
  await Promise.all([
    overQuota
      ? noteQuotaRefusal(deps, emitter, overQuota, (error) => workflowErrorEvent(deps, job.event, context, error, ""))
      : events.length === 0
        ? Promise.resolve([])
        : storeAndPublish(deps, emitter, events, now, storedSize(events)),
    deps.usage.addUsage(workflow.workspaceId, usageDay(now), {
      invocations: 1,
      computeTimeMs,
      credits: creditsOf(computeTimeMs),
    }),
  ]);

  // 7. The run record.
  const finished = runRecord(workflow, run, result, limited, failed, now);
  if (paused && result.pause) {
    finished.status = "paused";
    finished.pause = { kind: result.pause.kind, stepId: result.pause.stepId, untilMs: now + result.pause.afterMs };
  }
  if (continued) {
    // The steps before the continuation ran in the run it goes on from.
    const first = invocation.steps[0]?.id;
    const at = first === undefined ? finished.steps.length : finished.steps.findIndex((step) => step.id === first);
    if (at > 0) finished.steps = finished.steps.slice(at);
  }
  await deps.workflowRuns.finishRun(finished);
  const outcome: WorkflowRunOutcome = { outcome: "ran", run: finished, responseRefused: limited.responseRefused };
  if (limited.response) outcome.response = limited.response;
  if (failed) outcome.error = failed.error;
  return outcome;
}

/**
 * A checked result with the credentials of the run's accounts masked where it is stored or
 * logged: its logs, errors, summaries and exit reason (docs/components.md "Accounts in
 * components"). Sends and emits are the steps' own output and stay as they are.
 */
function maskWorkflowResult(result: WorkflowResult, credentials: readonly string[]): WorkflowResult {
  if (credentials.length === 0) return result;
  const mask = (text: string) => maskCredentials(text, credentials);
  const masked: WorkflowResult = {
    ...result,
    logs: result.logs.map((log) => ({ ...log, message: mask(log.message) })),
    steps: result.steps.map((step) => {
      const out = { ...step };
      if (step.error) out.error = maskedError(step.error, credentials);
      if (step.summary !== undefined) out.summary = mask(step.summary);
      if (step.exitReason !== undefined) out.exitReason = mask(step.exitReason);
      return out;
    }),
  };
  if (result.error) masked.error = maskedError(result.error, credentials);
  return masked;
}

/** Why the run failed and the step it belongs to, or undefined when it did not. */
function runFailure(result: WorkflowResult): { error: ErrorRecord; cellId: string } | undefined {
  const failedStep = result.steps.find((step) => step.status === "error" && step.error);
  if (failedStep?.error) return { error: trustedError(failedStep.error), cellId: failedStep.id };
  if (result.error) return { error: trustedError(result.error), cellId: "" };
  return undefined;
}

function runRecord(
  workflow: WorkflowRecord,
  run: WorkflowRun,
  result: WorkflowResult,
  limited: LimitedWorkflowResult,
  failed: { error: ErrorRecord; cellId: string } | undefined,
  now: number,
): WorkflowRun {
  const outcomes = new Map(result.steps.map((outcome) => [outcome.id, outcome]));
  const steps = workflow.steps.map((step): StepRunRecord => {
    const outcome = outcomes.get(step.id);
    if (!outcome) return { id: step.id, namespace: step.namespace, status: "skipped", durationMs: 0, exportBytes: 0 };
    const record: StepRunRecord = {
      id: step.id,
      namespace: step.namespace,
      status: outcome.status,
      durationMs: Math.max(0, Math.round(outcome.durationMs)),
      exportBytes: Math.max(0, Math.round(outcome.exportBytes)),
    };
    if (outcome.summary !== undefined) record.summary = clipText(outcome.summary, 200);
    return record;
  });
  const last = result.steps[result.steps.length - 1];
  const status: WorkflowRunStatus = failed ? "error" : last?.status === "exited" ? "exited" : "success";
  const finished: WorkflowRun = {
    ...run,
    status,
    endedAt: now,
    durationMs: Math.max(0, now - run.startedAt),
    steps,
    logs: limited.logs,
  };
  if (failed) {
    finished.error = {
      code: failed.error.name,
      cellId: failed.cellId,
      message: clipText(failed.error.message, RUN_ERROR_MESSAGE_CHARS),
    };
  }
  if (last?.status === "exited" && last.exitReason !== undefined) finished.exitReason = clipText(last.exitReason, 1024);
  return finished;
}

/**
 * Writes the steps' `$.service.db` writes onto their states, all together, retrying on a conflict
 * with another run of the workflow (on the states as they are then). A step whose writes would grow
 * its db over the limit keeps its db; the refusal is returned for `$errors`.
 */
async function mergeStepStates(
  deps: Deps,
  workflowId: string,
  statesBefore: Record<string, StepState>,
  steps: WorkflowResult["steps"],
  now: number,
): Promise<{ error: ErrorRecord; cellId: string }[]> {
  for (let attempt = 1; ; attempt++) {
    const states = attempt === 1 ? statesBefore : await deps.workflows.getStepStates(workflowId);
    const writes: StepStateWrite[] = [];
    const refused: { error: ErrorRecord; cellId: string }[] = [];
    for (const step of steps) {
      const state = states[step.id] ?? { db: {}, version: 0 };
      const merged = mergeServiceDb(state.db, step.dbWrites, now);
      if (merged.refused) refused.push({ error: merged.refused, cellId: step.id });
      else writes.push({ stepId: step.id, db: merged.db, expectedVersion: state.version });
    }
    try {
      if (writes.length > 0) await deps.workflows.putStepStates(workflowId, writes);
      return refused;
    } catch (error) {
      if (!isDomainError(error) || error.code !== "conflict" || attempt >= STATE_WRITE_ATTEMPTS) throw error;
    }
  }
}

/** The trigger event as a run record keeps it: whole when its JSON is short, else its JSON cut. */
function eventPreview(event: Json): Json {
  const text = JSON.stringify(event) ?? "null";
  return text.length <= RUN_EVENT_PREVIEW_CHARS ? event : clipText(text, RUN_EVENT_PREVIEW_CHARS);
}

/** A run record as `GET /v1/workflows/{id}/runs` shows it: snake case, times in epoch milliseconds. */
export function workflowRunView(run: WorkflowRun) {
  return {
    id: run.id,
    workflow_id: run.workflowId,
    deployment_id: run.deploymentId,
    trigger: { type: run.trigger.type, id: run.trigger.id },
    status: run.status,
    attempts: run.attempts,
    started_at_ms: run.startedAt,
    ended_at_ms: run.endedAt ?? null,
    duration_ms: run.durationMs ?? null,
    event_preview: run.eventPreview,
    steps: run.steps.map((step) => ({
      id: step.id,
      namespace: step.namespace,
      status: step.status,
      summary: step.summary ?? null,
      duration_ms: step.durationMs,
      export_bytes: step.exportBytes,
    })),
    error: run.error ? { code: run.error.code, cell_id: run.error.cellId, message: run.error.message } : null,
    exit_reason: run.exitReason ?? null,
    pause: run.pause ? { kind: run.pause.kind, step_id: run.pause.stepId, until_ms: run.pause.untilMs } : null,
    resumed_from: run.resumedFrom ?? null,
    cancel_reason: run.cancelReason ?? null,
    logs: run.logs.map((log) => ({ ts: log.ts, level: log.level, message: log.message, step: log.step })),
  };
}

/** `GET /v1/workflows/{id}/runs`: the workflow's run records, newest first. */
export async function listWorkflowRuns(
  deps: Pick<Deps, "workflows" | "workflowRuns" | "identity">,
  caller: Caller,
  workflowId: string,
  page: PageQuery,
) {
  await requireWorkflow(deps, caller, workflowId);
  const found = await deps.workflowRuns.listRuns(workflowId, page);
  return pageEnvelope(found, (run) => run.id, workflowRunView, page);
}
