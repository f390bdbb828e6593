/**
 * The triggers of a workflow (docs/design/workflows.md 3.6): one function per type that checks
 * a trigger of a create or update body and makes its record, and the side effects each type has
 * when a workflow is created, activated, deactivated or deleted. `workflows.ts` calls these and
 * nothing else of triggers, so the steps that make triggers fire (timers, sources) fill their own
 * function here and leave `workflows.ts` alone.
 */

import type { Deps } from "#core/ports/deps";
import { requireSource } from "./access.ts";
import type { SourceRecord } from "./component-model.ts";
import { conflict, DomainError, invalid, isDomainError } from "./errors.ts";
import type { Caller } from "./identity.ts";
import {
  deleteSource,
  deployProgress,
  deploySource,
  discardUnfinishedDeploy,
  handOverDeploy,
  updateSource,
} from "./sources.ts";
import { subscribeWorkflow, type WorkflowSubscriptionDeps } from "./subscriptions.ts";
import { validateTimerSpec } from "./timer-schedule.ts";
import type { HttpTriggerRecord, TimerTriggerRecord, TriggerRecord, WorkflowRecord } from "./workflow-model.ts";
import { timerTriggersOf, workflowTimerTarget } from "./workflow-timers.ts";

/** Most triggers a workflow may have (design 3.8). */
export const MAX_TRIGGERS = 10;

/** One item of a body's `triggers`, as the request schema lets it through. */
export interface TriggerInput {
  type: string;
  props?: Record<string, unknown> | undefined;
}

type TriggerDeps = Pick<Deps, "ids" | "clock">;

/** Random part of an HTTP trigger's endpoint key, as long as a source endpoint's. */
const ENDPOINT_KEY_BYTES = 18;

function knownProps(props: Record<string, unknown>, field: string, allowed: readonly string[]) {
  for (const name of Object.keys(props)) {
    if (!allowed.includes(name)) throw invalid(`${field}.${name}`, `is not a prop of this trigger type`);
  }
}

/** `{type: "http", props: {custom_response?}}`: a new endpoint key, random and unguessable. */
export function httpTrigger(deps: TriggerDeps, input: TriggerInput, field: string): HttpTriggerRecord {
  const props = input.props ?? {};
  knownProps(props, `${field}.props`, ["custom_response"]);
  const customResponse = props.custom_response ?? false;
  if (typeof customResponse !== "boolean") throw invalid(`${field}.props.custom_response`, "must be a boolean");
  const now = deps.clock.nowMs();
  return {
    type: "http",
    id: deps.ids.newId("httpTrigger"),
    key: deps.ids.newSecret(ENDPOINT_KEY_BYTES),
    customResponse,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * `{type: "timer", props: {intervalSeconds | cron, timezone?}}`, checked by the sources' rules
 * (decision 28). Scheduled while the workflow is active, by {@link activateTriggers}.
 */
export function timerTrigger(deps: TriggerDeps, input: TriggerInput, field: string): TimerTriggerRecord {
  const props = input.props ?? {};
  knownProps(props, `${field}.props`, ["intervalSeconds", "interval_seconds", "cron", "timezone"]);
  const spec = validateTimerSpec(props, `${field}.props`);
  const now = deps.clock.nowMs();
  return {
    type: "timer",
    id: deps.ids.newId("timerTrigger"),
    spec,
    scheduleChangedAt: now,
    createdAt: now,
    updatedAt: now,
  };
}

/** The fields of a source trigger's props that deploy a source, as `POST /sources` takes them. */
const DEPLOY_FIELDS = [
  "component_code",
  "component_files",
  "component_entry",
  "component_id",
  "component_url",
  "key",
  "configured_props",
  "name",
] as const;

/** A source trigger whose source is deployed once the whole body is checked ({@link deployTriggerSources}). */
export interface PendingSourceDeploy {
  type: "deploy";
  field: string;
  props: Record<string, unknown>;
}

/** A trigger of a body once checked: its record, or a source still to deploy. */
export type CheckedTrigger = TriggerRecord | PendingSourceDeploy;

/**
 * `{type: "source", props: {source_id}}`: a source the caller may manage (another account's, or a
 * missing one, is 400 on the field, decision 55), whose default channel the workflow will
 * subscribe to ({@link subscribeSourceTriggers}); it is never changed by the workflow (design
 * W17). `{type: "source", props: {component_code | component_files (+ component_entry) |
 * component_id | component_url | key, configured_props, name}}`:
 * a source the workflow deploys, as `POST /sources` does, after every other check; it follows the
 * workflow's `active` and is deleted with it.
 */
export async function sourceTrigger(
  deps: Pick<Deps, "sources" | "identity" | "ids">,
  caller: Caller,
  input: TriggerInput,
  field: string,
): Promise<CheckedTrigger> {
  const props = input.props ?? {};
  knownProps(props, `${field}.props`, ["source_id", ...DEPLOY_FIELDS]);
  const deploying = DEPLOY_FIELDS.filter((name) => props[name] !== undefined);
  if (props.source_id === undefined && deploying.length > 0) return { type: "deploy", field, props };
  if (deploying.length > 0) {
    throw invalid(`${field}.props.${deploying[0]}`, "give either source_id or the component of a source to deploy");
  }
  const sourceId = props.source_id;
  if (typeof sourceId !== "string" || sourceId === "") throw invalid(`${field}.props.source_id`, "is required");
  const source = await requireSource(deps, caller, sourceId).catch((error: unknown) => {
    throw isDomainError(error) && error.code === "not_found"
      ? invalid(`${field}.props.source_id`, "no such source")
      : error;
  });
  return {
    type: "source",
    sourceId: source.id,
    subscriptionId: deps.ids.newId("subscription"),
    deployedByWorkflow: false,
  };
}

/** Checks one trigger of a body and makes its record. */
export async function triggerRecord(
  deps: Pick<Deps, "sources" | "identity" | "ids" | "clock">,
  caller: Caller,
  input: TriggerInput,
  field: string,
): Promise<CheckedTrigger> {
  switch (input.type) {
    case "http":
      return httpTrigger(deps, input, field);
    case "timer":
      return timerTrigger(deps, input, field);
    case "source":
      return sourceTrigger(deps, caller, input, field);
    case "email":
      throw invalid(`${field}.type`, "email triggers are not available yet");
    default:
      throw invalid(`${field}.type`, 'must be "http", "timer" or "source"');
  }
}

/**
 * Checks a body's `triggers` (0 to {@link MAX_TRIGGERS}), in order. Nothing is written: sources
 * to deploy are left for {@link deployTriggerSources}.
 */
export async function triggerRecords(
  deps: Pick<Deps, "sources" | "identity" | "ids" | "clock">,
  caller: Caller,
  inputs: TriggerInput[],
): Promise<CheckedTrigger[]> {
  if (inputs.length > MAX_TRIGGERS) throw invalid("triggers", `a workflow may have at most ${MAX_TRIGGERS} triggers`);
  const records: CheckedTrigger[] = [];
  for (const [i, input] of inputs.entries()) records.push(await triggerRecord(deps, caller, input, `triggers[${i}]`));
  return records;
}

/** A validation error whose fields and message are told under `prefix` (`steps[2]`). */
export function underField(error: unknown, prefix: string): unknown {
  if (!isDomainError(error) || error.code !== "validation") return error;
  const issues =
    error.issues && error.issues.length > 0
      ? error.issues.map((issue) => ({ ...issue, field: `${prefix}.${issue.field}` }))
      : [{ field: prefix, message: error.message }];
  return new DomainError("validation", issues.map((issue) => `${issue.field}: ${issue.message}`).join("; "), issues);
}

/** The time a workflow route has (AWS: `answerByMs`), which the sources its triggers deploy spend. */
export interface TriggerDeployOptions {
  answerByMs?: number;
}

/** The sources of a body's triggers, deployed: the trigger records, and the sources still to hand over. */
export interface DeployedTriggers {
  records: TriggerRecord[];
  /** Sources whose deploy goes on in the background, to {@link handOverTriggerSources} once the workflow is stored. */
  handOver: string[];
}

/**
 * Deploys the sources of the checked triggers that ask for one, in the workflow's workspace, as
 * `POST /sources` does (its errors told under `triggers[i].props`), with the workflow's `active`:
 * an inactive workflow's source runs `deploy()` but not `activate()`. On a failure, the sources
 * deployed so far are removed again ({@link discardDeployedSources}).
 *
 * With `answerByMs` (AWS), each source's steps take the time left, and the first that does not fit
 * is written on the source for the deploy finisher, which is not invoked yet: the source is in
 * `handOver`, and its workflow hands it over once it is stored and subscribed to its other
 * sources; the finisher then subscribes the workflow to it when its hooks ran (docs/aws.md
 * "Deploy time budget").
 */
export async function deployTriggerSources(
  deps: Deps,
  caller: Caller,
  workflow: Pick<WorkflowRecord, "id" | "workspaceId" | "active">,
  checked: CheckedTrigger[],
  options: TriggerDeployOptions = {},
): Promise<DeployedTriggers> {
  const budget =
    options.answerByMs === undefined ? {} : { answerByMs: options.answerByMs, deferHandOver: true as const };
  const records: TriggerRecord[] = [];
  const handOver: string[] = [];
  try {
    for (const trigger of checked) {
      if (trigger.type !== "deploy") {
        records.push(trigger);
        continue;
      }
      const props = trigger.props as Record<(typeof DEPLOY_FIELDS)[number], never>;
      const source = await deploySource(
        deps,
        caller,
        { ...props, org_id: workflow.workspaceId },
        { workflowId: workflow.id, active: workflow.active, ...budget },
      ).catch((error: unknown) => {
        throw underField(error, `${trigger.field}.props`);
      });
      records.push({
        type: "source",
        sourceId: source.id,
        subscriptionId: deps.ids.newId("subscription"),
        deployedByWorkflow: true,
      });
      if (source.deploy_state === "deploying") handOver.push(source.id);
    }
  } catch (error) {
    await discardDeployedSources(deps, caller, records);
    throw error;
  }
  return { records, handOver };
}

/**
 * Hands the sources {@link deployTriggerSources} left to the deploy finisher, once their workflow is
 * stored and subscribed. One whose hand-over fails is shown failed on the source (the workflow
 * stays; a PUT of its triggers deploys it again).
 */
export async function handOverTriggerSources(deps: Deps, sourceIds: readonly string[]) {
  for (const sourceId of sourceIds) await handOverDeploy(deps, sourceId);
}

/** The sources a workflow's triggers deployed, with each one's position in `triggers` and record (none: gone). */
async function deployedSources(deps: Deps, triggers: readonly TriggerRecord[]) {
  const found: { index: number; sourceId: string; source: SourceRecord | undefined }[] = [];
  for (const [index, trigger] of triggers.entries()) {
    if (trigger.type !== "source" || !trigger.deployedByWorkflow) continue;
    found.push({ index, sourceId: trigger.sourceId, source: await deps.sources.getSource(trigger.sourceId) });
  }
  return found;
}

/**
 * Refuses (409) a change of the workflow's sources while one of them is still deploying (a create
 * or an update, in a request or in the deploy finisher): its hooks may be running, and another
 * hook run now (its `deactivate()`), or its removal, would leave at a third party what they made.
 * `doing` says what the request would have done. Failed and abandoned creates are not in the way:
 * a deletion removes them, an activation passes them by.
 */
export async function requireSettledTriggerSources(deps: Deps, workflow: WorkflowRecord, doing: string) {
  for (const { index, sourceId, source } of await deployedSources(deps, workflow.triggers)) {
    if (source && deployProgress(deps, source) === "deploying") throw stillDeploying(index, sourceId, doing);
  }
}

/** The 409 of a change that would touch the trigger source at `index` while it still deploys. */
const stillDeploying = (index: number, sourceId: string, doing: string) =>
  conflict(`triggers[${index}]: its source ${sourceId} is still deploying; ${doing} once its deploy_state is gone`);

/**
 * Removes the sources a request of the workflow deployed and must undo (its workflow was not made,
 * or its new triggers not stored): a source still marked (handed over to no finisher yet) is
 * removed without hooks, as a failed deploy; one deployed in the request is deleted as `DELETE
 * /sources/{id}` does (its `deactivate()` when active).
 */
export async function discardDeployedSources(deps: Deps, caller: Caller, triggers: TriggerRecord[]) {
  for (const { sourceId, source } of await deployedSources(deps, triggers)) {
    if (!source) continue;
    if (source.deployingSince !== undefined && source.updateFrom === undefined) {
      await discardUnfinishedDeploy(deps, source);
    } else {
      await deleteSource(deps, caller, sourceId).catch(notFoundIsGone);
    }
  }
}

const notFoundIsGone = (error: unknown) => {
  if (!isDomainError(error) || error.code !== "not_found") throw error;
};

/**
 * Deletes the sources these triggers deployed (W17), as `DELETE /sources/{id}` does: `deactivate()`
 * runs when the source is active, with its whole time limit, in the request or (AWS,
 * `answerByMs`: one that does not fit) in the deploy finisher, the source marked `deleting`
 * meanwhile. One already gone or being deleted so is skipped; a failed or abandoned create is
 * removed without hooks, as the sweep would; one still deploying is 409
 * ({@link requireSettledTriggerSources}, which the routes check before they change anything).
 */
export async function deleteDeployedSources(
  deps: Deps,
  caller: Caller,
  triggers: TriggerRecord[],
  options: TriggerDeployOptions = {},
) {
  for (const { index, sourceId, source } of await deployedSources(deps, triggers)) {
    if (!source) continue;
    const progress = deployProgress(deps, source);
    if (progress === "deploying") throw stillDeploying(index, sourceId, "try again");
    if (progress === "deleting") continue;
    if (progress === "failed") await discardUnfinishedDeploy(deps, source);
    else await deleteSource(deps, caller, sourceId, options).catch(notFoundIsGone);
  }
}

/**
 * Sets `active` on the sources a workflow deployed (W17), as `PUT /sources/{id}` does, with the
 * request's time (AWS: a hook that does not fit goes to the deploy finisher, and the source reads
 * `deploying` meanwhile). One already so is left alone (no hooks run twice); one deleted, failed or
 * abandoned is passed by (it runs nothing; a PUT of the workflow's triggers deploys it anew);
 * `only`, when given, limits it to those source ids.
 */
async function setDeployedSourcesActive(
  deps: Deps,
  caller: Caller,
  workflow: WorkflowRecord,
  active: boolean,
  options: TriggerDeployOptions,
  only?: ReadonlySet<string>,
) {
  for (const { sourceId, source } of await deployedSources(deps, workflow.triggers)) {
    if (!source || source.active === active || (only && !only.has(sourceId))) continue;
    const progress = deployProgress(deps, source);
    if (progress === "failed" || progress === "deleting") continue;
    await updateSource(deps, caller, sourceId, { active }, options).catch(notFoundIsGone);
  }
}

/**
 * Subscribes a new workflow to the default channel of each source trigger's source, under the
 * workflow's workspace, with the subscription id its record holds. Called once the workflow is
 * stored (the subscription names it as listener). The sources in `handedOver` are left to the
 * deploy finisher, which subscribes the workflow to each once its hooks ran, so that the workflow
 * gets what a source emits once it is deployed, as when it is deployed in the request.
 */
export async function subscribeSourceTriggers(
  deps: WorkflowSubscriptionDeps,
  workflow: WorkflowRecord,
  handedOver: readonly string[] = [],
) {
  for (const trigger of workflow.triggers) {
    // A source still to be handed over is subscribed to by the finisher, once its hooks ran.
    if (trigger.type !== "source" || handedOver.includes(trigger.sourceId)) continue;
    const stored = await subscribeWorkflow(deps, workflow, trigger.sourceId, trigger.subscriptionId);
    if (stored.id !== trigger.subscriptionId) {
      // Only one subscription per (emitter, listener, channel): a repeated source shares it.
      trigger.subscriptionId = stored.id;
    }
  }
}

/**
 * What a workflow's triggers do when it becomes active, or when an active workflow's triggers are
 * replaced (`previous`, the record before the PUT): the sources it deployed are activated and its
 * timers scheduled. HTTP triggers need nothing (the endpoint reads `active`), nor do given sources.
 */
export async function activateTriggers(
  deps: Deps,
  caller: Caller,
  workflow: WorkflowRecord,
  previous?: WorkflowRecord,
  options: TriggerDeployOptions = {},
): Promise<void> {
  await setDeployedSourcesActive(deps, caller, workflow, true, options);
  await scheduleTimers(deps, workflow, previous);
}

/**
 * What a workflow's triggers do when it stops being active, or before its triggers are replaced
 * (`next`, the record the PUT stores): its timers are cancelled, but for those `next` keeps
 * active, and the sources it deployed that `next` keeps are deactivated when `next` is inactive
 * (those it drops are deleted, their `deactivate()` with them: {@link deleteDeployedSources}).
 */
export async function deactivateTriggers(
  deps: Deps,
  caller: Caller,
  workflow: WorkflowRecord,
  next: WorkflowRecord | undefined,
  options: TriggerDeployOptions = {},
): Promise<void> {
  if (!next?.active) {
    const kept = next && new Set(next.triggers.flatMap((t) => (t.type === "source" ? [t.sourceId] : [])));
    await setDeployedSourcesActive(deps, caller, workflow, false, options, kept);
  }
  await cancelTimers(deps, workflow, next);
}

/**
 * What a workflow's triggers leave behind when it is deleted (or, `discard`, its creation fails):
 * its timers are cancelled, active or not, and the sources it deployed are deleted (their
 * `deactivate()` runs, on AWS maybe in the deploy finisher: {@link deleteDeployedSources}), or
 * discarded ({@link discardDeployedSources}).
 */
export async function removeTriggers(
  deps: Deps,
  caller: Caller,
  workflow: WorkflowRecord,
  discard = false,
  options: TriggerDeployOptions = {},
): Promise<void> {
  await cancelTimers(deps, workflow, undefined);
  if (discard) await discardDeployedSources(deps, caller, workflow.triggers);
  else await deleteDeployedSources(deps, caller, workflow.triggers, options);
}

/** Whether a timer of the previous record keeps running as `timer`: same id, same spec. */
const sameSchedule = (old: TimerTriggerRecord, timer: TimerTriggerRecord) =>
  old.id === timer.id && JSON.stringify(old.spec) === JSON.stringify(timer.spec);

/**
 * Schedules the workflow's timers. A timer the previous (active) record already ran with the same
 * spec is left alone: a PUT that keeps it does not move its slots (design 1.4, decision 217's
 * `schedule_changed_at`). One whose spec changed is replaced under its `ti_` id.
 */
async function scheduleTimers(deps: Pick<Deps, "timers">, workflow: WorkflowRecord, previous?: WorkflowRecord) {
  const running = previous?.active ? timerTriggersOf(previous) : [];
  for (const timer of timerTriggersOf(workflow)) {
    if (running.some((old) => sameSchedule(old, timer))) continue;
    await deps.timers.schedule(workflowTimerTarget(workflow.id, timer.id), timer.spec);
  }
}

/** Cancels the workflow's timers but those `next` (when active) still has: {@link scheduleTimers} keeps or replaces them. */
async function cancelTimers(deps: Pick<Deps, "timers">, workflow: WorkflowRecord, next: WorkflowRecord | undefined) {
  const kept = new Set(next?.active ? timerTriggersOf(next).map((timer) => timer.id) : []);
  for (const timer of timerTriggersOf(workflow)) {
    if (!kept.has(timer.id)) await deps.timers.cancel(workflowTimerTarget(workflow.id, timer.id));
  }
}
