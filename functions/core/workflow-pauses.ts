/**
 * Paused workflow runs (docs/workflows.md "Pausing a run"): `$.flow.suspend`, `$.flow.delay` and
 * `$.flow.rerun` end a run at the end of their step, which succeeded, and the run goes on later in
 * a continuation: a run of its own (a new `run_`, naming the one that paused) that starts from
 * what the pause kept, with the steps left (a rerun: the same step again).
 *
 * What ends a pause is the first of: a request to its resume URL, to its cancel URL, or its time
 * (`dueMs`: a delay or a rerun goes on, a suspension is cancelled). The store's `dispatch` lets only
 * one of them win; the winner queues the continuation, whose run id is made from the pause and the
 * dispatch, so a continuation queued twice runs once (`WorkflowRunStore.beginRun`). A pause is
 * forgotten once its continuation has ended.
 *
 * The URLs are `<publicUrl>/flow/<run id>/<secret>/{resume,cancel}`, the same on both platforms;
 * only a hash of the secret is kept.
 */
import { createHash } from "node:crypto";
import type { Deps } from "#core/ports/deps";
import type { PauseDispatch, PausedRun, PolledPausedRunStore } from "#core/ports/paused-runs";
import type { WorkflowRunJob } from "#core/ports/run-queue";
import type { HttpResponseSpec, Json, WorkflowPause } from "#runtime/protocol";
import { FLOW_PAUSE_MAX_MS, FLOW_RERUN_MAX, PAUSE_ERROR, PAUSE_STATE_MAX_BYTES } from "#runtime/result-limits";
import { sameHash } from "./api-keys.ts";
import { hopsOfRequest, isDeliveryLoop } from "./hops.ts";
import {
  corsPreflightResponse,
  fixedJsonResponse,
  type IncomingHttpRequest,
  LOOP_DETECTED_RESPONSE,
  toHttpRunEvent,
} from "./http-run-event.ts";
import { formatId } from "./ids.ts";
import { storageRefusal } from "./quotas.ts";
import { sha256Hex } from "./sha256.ts";
import type { WorkflowRecord, WorkflowRun } from "./workflow-model.ts";

/** A pause's id: the id of the run that paused (`formatId`'s alphabet). */
const RUN_ID = "run_[a-z0-9]{1,64}";
/** A pause's id, whole: what a schedule's input or a continuation's job may name. */
export const PAUSE_ID = new RegExp(`^${RUN_ID}$`);
/** The path of a pause's URLs, below the public URL. */
export const FLOW_PATH = new RegExp(`^/flow/(${RUN_ID})/([A-Za-z0-9_-]{24})/(resume|cancel)/?$`);
/** Bytes of the secret in a pause's URLs (24 characters of base64url). */
const FLOW_TOKEN_BYTES = 18;
/** Runs of one workflow that may be paused at once; a step pausing past it fails. */
export const MAX_PAUSED_RUNS_PER_WORKFLOW = 10_000;
/** Largest body of a request to a pause's URL: it is kept with the pause until the run goes on. */
export const FLOW_REQUEST_MAX_BYTES = 32 * 1024;
/**
 * Largest the request kept with a pause may be as JSON (its raw and its parsed body, its headers):
 * 32 KiB of control characters escapes to six times as much, and a DynamoDB item holds 400 KB.
 */
const FLOW_REQUEST_MAX_JSON_BYTES = 96 * 1024;
/**
 * A pause taken this long ago whose continuation has not ended is queued again (a process died,
 * the queue lost it): by local mode's sweep, and by a repeat of the request that took it. Not
 * sooner: every copy queued would count against the workspace's runs per minute.
 */
export const PAUSE_REQUEUE_MS = 10 * 60 * 1000;
/** Pauses dispatched per pass of local mode's driver. */
export const DISPATCH_BATCH = 100;

/**
 * Where the pause URLs of one invocation start, with a new secret: `<public URL>/flow/<run id>/<secret>`
 * (the runtime appends `/resume` and `/cancel`: one string per run in the sandbox's message).
 */
export function newFlowBase(deps: Pick<Deps, "ids" | "runtime">, runId: string): string {
  return `${deps.runtime.publicUrl.replace(/\/+$/, "")}/flow/${runId}/${deps.ids.newSecret(FLOW_TOKEN_BYTES)}`;
}

/** The secret of an invocation's pause URLs (trusted code made them: their last segment). */
const tokenOf = (flowBase: string) => flowBase.split("/").at(-1) ?? "";

/**
 * The run id of the continuation of `pause` as `dispatch` took it: the same however often it is
 * queued, and of the dispatch's time (runs list by the time in their ids).
 */
export const continuationRunId = (pause: PausedRun, dispatch: PauseDispatch) =>
  formatId(
    "run",
    dispatch.atMs,
    createHash("sha256").update(`${pause.id}\n${dispatch.how}\n${dispatch.atMs}`).digest(),
  );

/**
 * Why a result's pause does not fit its run, or undefined (`checkWorkflowResult`): it must follow
 * the last step, which succeeded, be within the limits, and a rerun must have reruns left.
 */
export function pauseInconsistency(
  pause: WorkflowPause,
  lastStep: { id: string; status: string } | undefined,
  runs: number,
  canPause: boolean,
): string | undefined {
  if (!canPause) return "it pauses, and this run could not";
  if (!lastStep || lastStep.id !== pause.stepId || lastStep.status !== "success") {
    return "its pause does not follow its last step, which succeeded";
  }
  if (!(pause.afterMs >= 0 && pause.afterMs <= FLOW_PAUSE_MAX_MS)) return "its pause is longer than a run may pause";
  if (pause.kind === "rerun") {
    const max = pause.maxReruns;
    if (max === undefined || !Number.isInteger(max) || max < 0 || max > FLOW_RERUN_MAX) {
      return "its rerun has no valid maxReruns";
    }
    if (runs > max) return "its step reruns past its maxReruns";
  }
  return undefined;
}

/** A continuation's part of a run: the pause it goes on from. */
export interface Continuation {
  pause: PausedRun;
  dispatch: PauseDispatch;
}

/**
 * Keeps a run's pause (before its record is written: a crash between the two does the run again,
 * which pauses again under the same id). Resolves to the error the run fails with instead when the
 * pause cannot be kept: too many paused runs, or a state over {@link PAUSE_STATE_MAX_BYTES}.
 */
export async function keepPause(
  deps: Pick<Deps, "pausedRuns" | "usage" | "quotas" | "clock">,
  workflow: WorkflowRecord,
  job: WorkflowRunJob,
  run: WorkflowRun,
  flowBase: string,
  pause: WorkflowPause,
  continued: Continuation | undefined,
  stepsKey: string,
  now: number,
): Promise<{ name: string; message: string; ts: number } | undefined> {
  const state: PausedRun["state"] = { event: job.event, steps: pause.steps };
  if (pause.context !== undefined) state.context = pause.context;
  const bytes = Buffer.byteLength(JSON.stringify(state));
  if (bytes > PAUSE_STATE_MAX_BYTES) {
    const message = `$.flow.${pause.kind}: the run cannot pause: what it would keep (the trigger event and the steps' exports) is ${bytes} bytes, over the ${PAUSE_STATE_MAX_BYTES} a paused run may keep`;
    return { name: PAUSE_ERROR, message, ts: now };
  }
  // The pause this run goes on from is still kept (until this run has ended): it is not counted.
  const others = (await deps.pausedRuns.countPending(workflow.id)) - (continued ? 1 : 0);
  if (others >= MAX_PAUSED_RUNS_PER_WORKFLOW) {
    const message = `$.flow.${pause.kind}: the run cannot pause: ${MAX_PAUSED_RUNS_PER_WORKFLOW} runs of this workflow are paused already`;
    return { name: PAUSE_ERROR, message, ts: now };
  }
  // What a paused run keeps counts in the workspace's stored bytes (`countPausedBytes`): a
  // workspace over its storage quotas keeps no more of it.
  const overQuota = await storageRefusal(deps, workflow.workspaceId);
  if (overQuota) {
    const message = `$.flow.${pause.kind}: the run cannot pause: the workspace is over its ${overQuota.quota} quota (${overQuota.limit}), which its events and its paused runs count against; delete events, or resume or cancel paused runs`;
    return { name: PAUSE_ERROR, message, ts: now };
  }
  const step = workflow.steps.find((candidate) => candidate.id === pause.stepId);
  const previousRuns =
    continued?.pause.kind === "rerun" && continued.pause.stepId === pause.stepId ? continued.pause.runs : 1;
  const kept: PausedRun = {
    id: run.id,
    tokenHash: sha256Hex(tokenOf(flowBase)),
    workflowId: workflow.id,
    stepsKey,
    originRunId: continued?.pause.originRunId ?? run.id,
    trigger: run.trigger,
    kind: pause.kind,
    stepId: pause.stepId,
    stepNamespace: step?.namespace ?? "",
    createdAt: now,
    dueMs: now + pause.afterMs,
    runs: pause.kind === "rerun" ? previousRuns + 1 : 1,
    state,
    stateBytes: bytes,
  };
  if (job.hops !== undefined) kept.hops = job.hops;
  // A run done again after a crash replaces its first try's pause: only the difference is counted.
  const replaced = await deps.pausedRuns.get(run.id);
  await deps.pausedRuns.add(kept);
  await countPausedBytes(deps, workflow, bytes - (replaced?.stateBytes ?? 0), now);
  return undefined;
}

/**
 * Adds what paused runs keep to (or, negative, takes it from) the workspace's stored bytes, under
 * the workflow, so the storage quotas bound it as they bound events.
 */
export async function countPausedBytes(
  deps: Pick<Deps, "usage">,
  workflow: Pick<WorkflowRecord, "id" | "workspaceId">,
  bytes: number,
  now: number,
): Promise<void> {
  // A pause kept before pauses were counted has no `stateBytes`: nothing to take back.
  if (Number.isFinite(bytes) && bytes !== 0) {
    await deps.usage.addStored(workflow.workspaceId, workflow.id, now, { events: 0, bytes });
  }
}

/**
 * What a paused run's continuation needs of its workflow to be the same: its steps (ids,
 * namespaces, code, disabled), hashed. A PUT of its triggers or name, or of the very same steps
 * (saved again as new components), keeps it; a step added, removed, reordered or with other code
 * changes it.
 */
export function stepsKeyOf(
  loaded: readonly { step: { id: string; namespace: string; disabled?: boolean }; component: { codeHash: string } }[],
): string {
  const steps = loaded.map(({ step, component }) => [
    step.id,
    step.namespace,
    component.codeHash,
    step.disabled === true,
  ]);
  return sha256Hex(JSON.stringify(steps));
}

/** The job of a pause's continuation, for the run queue. */
function continuationJob(pause: PausedRun, dispatch: PauseDispatch): WorkflowRunJob {
  const job: WorkflowRunJob = {
    kind: "workflow",
    workflowId: pause.workflowId,
    runId: continuationRunId(pause, dispatch),
    trigger: pause.trigger.type,
    triggerId: pause.trigger.id,
    // The event is the pause's: the job only names it (a queued job stays small).
    event: null,
    resume: { pauseId: pause.id },
  };
  const hops = Math.max(pause.hops ?? 0, dispatch.hops ?? 0);
  if (hops > 0) job.hops = hops;
  return job;
}

/** Queues the continuation of a taken pause; again, under the same run id, when it is asked again. */
async function queueContinuation(deps: Pick<Deps, "runs" | "log">, pause: PausedRun): Promise<void> {
  if (!pause.dispatch) return;
  await deps.runs.enqueue(continuationJob(pause, pause.dispatch));
  deps.log.info("paused workflow run dispatched", {
    workflow_id: pause.workflowId,
    run_id: pause.id,
    how: pause.dispatch.how,
  });
}

const NO_PAUSE_RESPONSE = fixedJsonResponse(404, {
  error: "no paused run at this URL: it went on, was cancelled, or never paused",
});
const FLOW_HEAD_RESPONSE = Object.freeze({ status: 204, headers: Object.freeze({}), body: "" });
const INACTIVE_WORKFLOW_RESPONSE = fixedJsonResponse(409, {
  error:
    "the workflow is inactive: activate it (PUT /v1/workflows/{id} with active: true), then request this URL again",
});
const FLOW_BODY_TOO_LARGE = fixedJsonResponse(413, {
  error: `the request is larger than a paused run keeps: a body of at most ${FLOW_REQUEST_MAX_BYTES} bytes, ${FLOW_REQUEST_MAX_JSON_BYTES} as the JSON of the request with its headers`,
});

/**
 * A request to a pause's resume or cancel URL (`/flow/<run id>/<secret>/<action>`, any method, no
 * API key: the secret is the proof). The first of the URLs and the pause's time wins; asking for
 * what won again is answered as the first time (a caller may retry), asking for the other is a 409.
 */
export async function receiveFlowRequest(
  deps: Pick<Deps, "pausedRuns" | "runs" | "log" | "clock" | "workflows">,
  runId: string,
  token: string,
  action: "resume" | "cancel",
  request: IncomingHttpRequest,
): Promise<HttpResponseSpec> {
  if (request.method === "OPTIONS") return corsPreflightResponse(request.headers);
  const pause = await deps.pausedRuns.get(runId);
  if (!pause || !sameHash(sha256Hex(token), pause.tokenHash)) return NO_PAUSE_RESPONSE;
  // A client checking the link (a chat's preview, a mail scanner) does not decide the pause.
  if (request.method === "HEAD") return FLOW_HEAD_RESPONSE;
  if (request.body.length > FLOW_REQUEST_MAX_BYTES) return FLOW_BODY_TOO_LARGE;
  // A run that sends its own URL on (`$.send.http`) loops at most as far as deliveries may.
  const hops = hopsOfRequest(request.headers);
  if (isDeliveryLoop(hops)) {
    deps.log.warn("a delivery loop was refused", { workflow_id: pause.workflowId, hops });
    return LOOP_DETECTED_RESPONSE;
  }
  // While the workflow is inactive the pause is kept, to be resumed once it is active again.
  const workflow = await deps.workflows.getWorkflow(pause.workflowId);
  if (!workflow?.active && !pause.dispatch) return INACTIVE_WORKFLOW_RESPONSE;
  const event = toHttpRunEvent(request) as unknown as Json;
  if (Buffer.byteLength(JSON.stringify(event)) > FLOW_REQUEST_MAX_JSON_BYTES) return FLOW_BODY_TOO_LARGE;
  const taken = await deps.pausedRuns.dispatch(runId, {
    how: action,
    atMs: deps.clock.nowMs(),
    request: event,
    ...(hops > 0 ? { hops } : {}),
  });
  if (!taken?.pause.dispatch) return NO_PAUSE_RESPONSE;
  const how = effectOf(taken.pause, taken.pause.dispatch);
  if (how !== action) {
    return fixedJsonResponse(409, {
      error: `the run was ${how === "resume" ? "resumed" : "cancelled"} already${taken.pause.dispatch.how === "due" ? " (its time came)" : ""}`,
    });
  }
  if (taken.won || deps.clock.nowMs() - taken.pause.dispatch.atMs >= PAUSE_REQUEUE_MS) {
    await queueContinuation(deps, taken.pause);
  }
  return fixedJsonResponse(202, { status: action === "resume" ? "resumed" : "cancelled", run_id: runId });
}

/** What a dispatch does: its time resumes a delay or a rerun and cancels a suspension. */
export function effectOf(pause: PausedRun, dispatch: PauseDispatch): "resume" | "cancel" {
  if (dispatch.how !== "due") return dispatch.how;
  return pause.kind === "suspend" ? "cancel" : "resume";
}

/**
 * Dispatches a pause whose time came (AWS: its schedule fired; local mode: the driver found it). A
 * pause a URL took already has its continuation queued again under the same run id: that also
 * covers a continuation lost with the process that took it.
 * @returns whether there was such a pause.
 */
export async function dispatchDuePause(
  deps: Pick<Deps, "pausedRuns" | "runs" | "log">,
  pauseId: string,
  nowMs: number,
): Promise<boolean> {
  const taken = await deps.pausedRuns.dispatch(pauseId, { how: "due", atMs: nowMs });
  if (!taken) return false;
  await queueContinuation(deps, taken.pause);
  return true;
}

/**
 * Local mode's driver: dispatches up to 100 pauses whose time came, and queues again those taken
 * {@link PAUSE_REQUEUE_MS} ago whose continuation has not ended.
 * @returns how many it handled; {@link DISPATCH_BATCH} means more may be due.
 */
export async function dispatchDuePauses(
  deps: Pick<Deps, "runs" | "log">,
  store: PolledPausedRunStore,
  nowMs: number,
): Promise<number> {
  const due = await store.due(nowMs, nowMs - PAUSE_REQUEUE_MS, DISPATCH_BATCH);
  for (const pause of due) {
    if (pause.dispatch) {
      await store.touch(pause.id, nowMs);
      await queueContinuation(deps, pause);
    } else {
      await dispatchDuePause({ ...deps, pausedRuns: store }, pause.id, nowMs);
    }
  }
  return due.length;
}
