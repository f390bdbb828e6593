/**
 * The triggers of a workflow (docs/design/workflows.md 3.6): one function per type that checks
 * a trigger of a create or update body and makes its record, and the side effects each type has
 * when a workflow is created, activated, deactivated or deleted. `workflows.ts` calls these and
 * nothing else of triggers, so the steps that make triggers fire (timers, sources) fill their own
 * function here and leave `workflows.ts` alone.
 */

import type { Deps } from "#core/ports/deps";
import { requireSource } from "./access.ts";
import { invalid, isDomainError } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { subscribeWorkflow, type WorkflowSubscriptionDeps } from "./subscriptions.ts";
import { validateTimerSpec } from "./timer-schedule.ts";
import type {
  HttpTriggerRecord,
  SourceTriggerRecord,
  TimerTriggerRecord,
  TriggerRecord,
  WorkflowRecord,
} from "./workflow-model.ts";

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
 * (decision 28). Stored only: scheduling the timers of active workflows is a later step of the
 * design (7), which fills {@link activateTriggers} and {@link deactivateTriggers}.
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

/**
 * `{type: "source", props: {source_id}}`: a source the caller may manage (another account's, or a
 * missing one, is 400 on the field, decision 55), whose default channel the workflow will
 * subscribe to ({@link subscribeSourceTriggers}). A source given by id is never changed by the
 * workflow (design W17). Deploying a source from the trigger (`component_code`, `component_id`,
 * `key`) is refused for now: it needs the source store to keep the deploying workflow.
 */
export async function sourceTrigger(
  deps: Pick<Deps, "sources" | "identity" | "ids">,
  caller: Caller,
  input: TriggerInput,
  field: string,
): Promise<SourceTriggerRecord> {
  const props = input.props ?? {};
  for (const name of ["component_code", "component_id", "component_url", "key", "configured_props"]) {
    if (props[name] !== undefined) {
      throw invalid(
        `${field}.props.${name}`,
        "deploying a source from a workflow trigger is not available yet: deploy it with POST /v1/sources and give its source_id",
      );
    }
  }
  knownProps(props, `${field}.props`, ["source_id"]);
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
): Promise<TriggerRecord> {
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

/** Checks a body's `triggers` (0 to {@link MAX_TRIGGERS}) and makes their records, in order. */
export async function triggerRecords(
  deps: Pick<Deps, "sources" | "identity" | "ids" | "clock">,
  caller: Caller,
  inputs: TriggerInput[],
): Promise<TriggerRecord[]> {
  if (inputs.length > MAX_TRIGGERS) throw invalid("triggers", `a workflow may have at most ${MAX_TRIGGERS} triggers`);
  const records: TriggerRecord[] = [];
  for (const [i, input] of inputs.entries()) records.push(await triggerRecord(deps, caller, input, `triggers[${i}]`));
  return records;
}

/**
 * Subscribes a new workflow to the default channel of each source trigger's source, under the
 * workflow's workspace, with the subscription id its record holds. Called once the workflow is
 * stored (the subscription names it as listener).
 */
export async function subscribeSourceTriggers(deps: WorkflowSubscriptionDeps, workflow: WorkflowRecord) {
  for (const trigger of workflow.triggers) {
    if (trigger.type !== "source") continue;
    const stored = await subscribeWorkflow(deps, workflow, trigger.sourceId, trigger.subscriptionId);
    if (stored.id !== trigger.subscriptionId) {
      // Only one subscription per (emitter, listener, channel): a repeated source shares it.
      trigger.subscriptionId = stored.id;
    }
  }
}

/**
 * What a workflow's triggers do when it becomes active. HTTP triggers need nothing (the endpoint
 * reads `active`), nor do given sources. The seam for design step 7: schedule its timers here
 * (`deps.timers`, keyed by `ti_`).
 */
export async function activateTriggers(_deps: Deps, _workflow: WorkflowRecord): Promise<void> {}

/**
 * What a workflow's triggers do when it stops being active, or before it is deleted. The seam for
 * design step 7: cancel its timers here.
 */
export async function deactivateTriggers(_deps: Deps, _workflow: WorkflowRecord): Promise<void> {}
