/**
 * Workflows (`p_`): create, read, list, update (activation and replacement of steps, triggers and
 * name) and delete (docs/design/workflows.md 1.2-1.4, 3.8). Every step's code is a saved component
 * (W11); the host builds a workflow's deployment at create and on every change of its steps, so a
 * step that does not load answers 400 at once, even for an inactive workflow.
 *
 * Each problem with a body answers 400 naming its field by path (`steps[2].props.url`, W3): within
 * one step every prop problem at once, as decision 26 does; otherwise the first bad field wins.
 */

import type { WorkflowCode } from "#core/ports/component-host";
import type { Deps } from "#core/ports/deps";
import { changedMeanwhile, isVersion } from "#core/ports/workflow-store";
import { requireWorkflow, requireWorkspace } from "./access.ts";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import type { ComponentRecord, PropDescription, SourceRecord } from "./component-model.ts";
import { findComponent, registryComponent, saveComponentOf } from "./components.ts";
import { stepPropDefinitions } from "./dynamic-props.ts";
import { conflict, invalid, isDomainError, notFound } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { requireDisplayableName } from "./names.ts";
import { type Page, type PageQuery, pageEnvelope } from "./pagination.ts";
import { sealSecretValues, type ValidatedProps } from "./props.ts";
import { resolveComponentProps } from "./resolve-props.ts";
import { applyAutoSubscriptions, forgetSubscriptionsOf } from "./subscriptions.ts";
import { requestHash, requireExternalId } from "./workflow-external-ids.ts";
import type { StepRecord, TriggerRecord, WorkflowRecord } from "./workflow-model.ts";
import { countPausedBytes } from "./workflow-pauses.ts";
import { workflowCode } from "./workflow-runs.ts";
import { withTemplate } from "./workflow-templates.ts";
import {
  activateTriggers,
  deactivateTriggers,
  deleteDeployedSources,
  deployTriggerSources,
  discardDeployedSources,
  handOverTriggerSources,
  removeTriggers,
  requireSettledTriggerSources,
  subscribeSourceTriggers,
  type TriggerDeployOptions,
  type TriggerInput,
  triggerRecords,
  underField,
} from "./workflow-triggers.ts";
import { type WorkflowViewParts, workflowView } from "./workflow-views.ts";

/** Most steps a workflow may have (design 3.8). */
export const MAX_STEPS = 50;
/** Largest JSON of a workflow record (its configured props included), checked before it is stored (design 2.4). */
export const MAX_STORED_WORKFLOW_BYTES = 300 * 1024;
/** Longest workflow name (as a source's). */
export const WORKFLOW_NAME_MAX_LENGTH = 200;
export const DEFAULT_WORKFLOW_NAME = "Untitled workflow";
/** A step's namespace: the key of its exports in `steps`. */
const NAMESPACE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** One item of a body's `steps`. */
export interface StepInput {
  namespace?: string | undefined;
  component_code?: string | undefined;
  /** A multi-file component (`#core/component-files`), with its entry. */
  component_files?: Record<string, string> | undefined;
  component_entry?: string | undefined;
  component_id?: string | undefined;
  key?: string | undefined;
  props?: Record<string, unknown> | undefined;
  disabled?: boolean | undefined;
}

export interface WorkflowSettingsInput {
  name?: string | undefined;
  auto_deploy?: boolean | undefined;
}

export interface CreateWorkflowInput extends WorkspaceChoice {
  project_id?: string | undefined;
  template_id?: string | undefined;
  external_id?: string | undefined;
  settings?: WorkflowSettingsInput | undefined;
  steps?: StepInput[] | undefined;
  triggers?: TriggerInput[] | undefined;
}

export interface UpdateWorkflowInput {
  active?: boolean | undefined;
  external_id?: string | undefined;
  /** Taken only by a create: refused (400), never ignored. */
  template_id?: unknown;
  settings?: (Pick<WorkflowSettingsInput, "name"> & { auto_deploy?: unknown }) | undefined;
  steps?: StepInput[] | undefined;
  triggers?: (TriggerInput & { id?: string | undefined })[] | undefined;
}

/** The `external_id` of a body and the hash of the body it names (design 1.4), when it has one. */
function externalIdOf(input: { external_id?: string | undefined }) {
  if (input.external_id === undefined) return undefined;
  return { externalId: requireExternalId(input.external_id), requestHash: requestHash(input) };
}

/**
 * The answer to a create whose `external_id` already names `existing` in the workspace: the
 * workflow itself when it was written by the same request (a retried create), else a 409.
 */
async function repeatedCreate(deps: Deps, existing: WorkflowRecord, hash: string) {
  if (existing.requestHash !== hash) {
    throw conflict(`external_id: already names workflow ${existing.id} with another definition`);
  }
  return present(deps, existing);
}

function workflowName(name: string | undefined): string {
  if (name === undefined) return DEFAULT_WORKFLOW_NAME;
  if (name.length < 1 || name.length > WORKFLOW_NAME_MAX_LENGTH) {
    throw invalid("settings.name", `must be 1 to ${WORKFLOW_NAME_MAX_LENGTH} characters`);
  }
  return requireDisplayableName("settings.name", name);
}

/** A project of the workspace: the one named, else its first. */
async function projectOf(deps: Pick<Deps, "identity">, workspaceId: string, projectId: string | undefined) {
  const projects = await deps.identity.listProjects(workspaceId);
  if (projectId === undefined) {
    const [first] = projects;
    if (!first) throw notFound("project");
    return first.id;
  }
  if (!projects.some((project) => project.id === projectId)) {
    throw invalid("project_id", "is not a project of the workflow's workspace");
  }
  return projectId;
}

type StepDeps = Pick<
  Deps,
  "components" | "host" | "fetcher" | "registry" | "clock" | "ids" | "secrets" | "appAccounts"
>;

/** The component a step names, saved as `POST /sources` saves one. */
async function stepComponent(deps: StepDeps, caller: Caller, input: StepInput, field: string) {
  const given = (["component_code", "component_files", "component_id", "key"] as const).filter(
    (name) => input[name] !== undefined,
  );
  if (given.length !== 1)
    throw invalid(field, "give exactly one of component_code, component_files, component_id, key");
  if (input.component_entry !== undefined && input.component_files === undefined) {
    throw invalid(`${field}.component_entry`, "is given without component_files");
  }
  if (input.component_code !== undefined || input.component_files !== undefined) {
    const code = {
      component_code: input.component_code,
      component_files: input.component_files,
      component_entry: input.component_entry,
    };
    return {
      origin: "code" as const,
      component: await saveComponentOf(deps, caller.userId, code).catch((error: unknown) => {
        throw underField(error, field);
      }),
    };
  }
  if (input.component_id !== undefined) {
    const component = await findComponent(deps, caller, input.component_id).catch((error: unknown) => {
      throw isDomainError(error) && error.code === "not_found"
        ? invalid(`${field}.component_id`, "no such component")
        : error;
    });
    return { origin: "saved" as const, component };
  }
  const component = await registryComponent(deps, input.key as string).catch((error: unknown) => {
    throw isDomainError(error) && error.code === "not_found"
      ? invalid(`${field}.key`, "no registry component has this key")
      : error;
  });
  return { origin: "registry" as const, component };
}

/**
 * Refuses what only a source can be. A code step (`defineComponent({ async run({steps, $}) })`)
 * has no `type` and describes as a source (decision 170), so the type alone refuses nothing:
 * hooks, `dedupe` and `$.interface.*` props do.
 */
function requireStepComponent(component: ComponentRecord, field: string, choice: string) {
  const { hooks, dedupe, props } = component.metadata;
  const sourceOnly = [
    ...(hooks.length > 0 ? [`hooks (${hooks.join(", ")})`] : []),
    ...(dedupe !== undefined ? ["dedupe"] : []),
    ...props.filter((prop) => prop.type.startsWith("$.interface.")).map((prop) => `the ${prop.type} prop ${prop.name}`),
  ];
  if (sourceOnly.length > 0) {
    throw invalid(
      `${field}.${choice}`,
      `a step must be an action or a code step; this component has ${sourceOnly.join(", ")}`,
    );
  }
}

/**
 * The time the `additionalProps` of one request's steps take together: one time limit. A step
 * whose `additionalProps` would start after it is refused, so a request of many slow steps ends
 * within about twice the limit rather than fifty times it.
 */
interface AdditionalPropsBudget {
  startedAt?: number;
}

/**
 * A step's props validated against its component's, as a source's at deploy: when the component
 * has `additionalProps`, the static props given are validated first, `additionalProps` runs on
 * them, and every prop given is validated against the final set, which the step keeps.
 */
async function stepProps(
  deps: Deps,
  caller: Caller,
  workspaceId: string,
  component: ComponentRecord,
  input: Record<string, unknown> | undefined,
  field: string,
  budget: AdditionalPropsBudget,
): Promise<{ validated: ValidatedProps; definitions?: PropDescription[] }> {
  return resolveComponentProps(deps, workspaceId, component, input, {
    fieldPrefix: `${field}.props`,
    expressions: true,
    askAdditionalProps: async (first) => {
      budget.startedAt ??= deps.clock.nowMs();
      if (deps.clock.nowMs() - budget.startedAt > deps.runtime.invocationTimeoutMs) {
        throw invalid(
          `${field}.props`,
          `additionalProps was not run: the steps' additionalProps before it took the time limit (${deps.runtime.invocationTimeoutMs} ms) together`,
        );
      }
      return stepPropDefinitions(deps, caller, workspaceId, component, first.values, `${field}.props`);
    },
  });
}

/** Checks a body's `steps` and makes their records, each with its component (by id). */
async function stepRecords(
  deps: Deps,
  caller: Caller,
  workspaceId: string,
  inputs: StepInput[],
  components: Map<string, ComponentRecord>,
) {
  if (inputs.length < 1 || inputs.length > MAX_STEPS) throw invalid("steps", `must have 1 to ${MAX_STEPS} steps`);
  const namespaces = new Set<string>();
  const steps: StepRecord[] = [];
  const budget: AdditionalPropsBudget = {};
  for (const [i, input] of inputs.entries()) {
    const field = `steps[${i}]`;
    const namespace = input.namespace;
    if (namespace === undefined || namespace === "") throw invalid(`${field}.namespace`, "is required");
    if (!NAMESPACE.test(namespace)) {
      throw invalid(`${field}.namespace`, "must start with a letter or _ and hold at most 64 letters, digits or _");
    }
    if (namespace === "trigger") throw invalid(`${field}.namespace`, '"trigger" names the trigger event in steps');
    if (namespaces.has(namespace)) throw invalid(`${field}.namespace`, `another step is named "${namespace}"`);
    namespaces.add(namespace);
    const { origin, component } = await stepComponent(deps, caller, input, field);
    const code = input.component_files === undefined ? "component_code" : "component_files";
    const choice = origin === "code" ? code : origin === "saved" ? "component_id" : "key";
    requireStepComponent(component, field, choice);
    const { validated, definitions } = await stepProps(
      deps,
      caller,
      workspaceId,
      component,
      input.props,
      field,
      budget,
    );
    components.set(component.id, component);
    const step: StepRecord = {
      id: deps.ids.newId("step"),
      namespace,
      disabled: input.disabled ?? false,
      origin,
      componentId: component.id,
      configuredProps: await sealSecretValues(deps.secrets, validated.values, validated.secretNames),
    };
    if (definitions) step.propDefinitions = definitions;
    steps.push(step);
  }
  return steps;
}

/** A step keeps its `c_` id, and with it its `$.service.db`, when the previous list had its namespace (1.4). */
function keepStepIds(previous: StepRecord[], next: StepRecord[]): StepRecord[] {
  const ids = new Map(previous.map((step) => [step.namespace, step.id]));
  return next.map((step) => ({ ...step, id: ids.get(step.namespace) ?? step.id }));
}

/**
 * A trigger keeps its id (an HTTP trigger its key and URL) when the item names it, else when it is
 * at the same position among the triggers of its type (1.4); a timer keeps `schedule_changed_at`
 * while its spec is the same. A source trigger keeps its subscription while it keeps its source.
 */
function keepTriggerIds(previous: TriggerRecord[], next: TriggerRecord[], named: (string | undefined)[]) {
  const taken = new Set<TriggerRecord>();
  const counts = new Map<string, number>();
  return next.map((trigger, i): TriggerRecord => {
    const index = counts.get(trigger.type) ?? 0;
    counts.set(trigger.type, index + 1);
    const old = previousTrigger(previous, trigger, named[i], index, taken);
    if (old === undefined) return trigger;
    taken.add(old);
    if (trigger.type === "http" && old.type === "http") {
      const updatedAt = old.customResponse === trigger.customResponse ? old.updatedAt : trigger.updatedAt;
      return { ...trigger, id: old.id, key: old.key, createdAt: old.createdAt, updatedAt };
    }
    if (trigger.type === "timer" && old.type === "timer") {
      const same = JSON.stringify(old.spec) === JSON.stringify(trigger.spec);
      return same
        ? {
            ...trigger,
            id: old.id,
            createdAt: old.createdAt,
            scheduleChangedAt: old.scheduleChangedAt,
            updatedAt: old.updatedAt,
          }
        : { ...trigger, id: old.id, createdAt: old.createdAt };
    }
    if (trigger.type === "source" && old.type === "source") return { ...trigger, subscriptionId: old.subscriptionId };
    return trigger;
  });
}

/** The trigger of the previous list that `trigger` takes the place of, if any (see {@link keepTriggerIds}). */
function previousTrigger(
  previous: TriggerRecord[],
  trigger: TriggerRecord,
  named: string | undefined,
  index: number,
  taken: Set<TriggerRecord>,
): TriggerRecord | undefined {
  const free = previous.filter((item) => item.type === trigger.type && !taken.has(item));
  if (trigger.type === "source")
    return free.find((item) => item.type === "source" && item.sourceId === trigger.sourceId);
  if (named !== undefined) return free.find((item) => item.type !== "source" && item.id === named);
  const candidate = previous.filter((item) => item.type === trigger.type)[index];
  return candidate !== undefined && !taken.has(candidate) ? candidate : undefined;
}

/**
 * Refuses a configuration over {@link MAX_STORED_WORKFLOW_BYTES} before anything is stored or
 * built (design 2.4): the DynamoDB adapter's own limit (413, decision 193) is then a safety net.
 */
function checkSize(workflow: WorkflowRecord) {
  const bytes = Buffer.byteLength(JSON.stringify(workflow));
  if (bytes > MAX_STORED_WORKFLOW_BYTES) {
    throw invalid(
      "steps",
      `the workflow's configuration is over 300 KB (${bytes} bytes, at most ${MAX_STORED_WORKFLOW_BYTES})`,
    );
  }
}

/** Refuses two source triggers on one source (they would be one subscription). */
function requireDistinctSources(triggers: readonly { type: string; sourceId?: string }[]) {
  const seen = new Set<string>();
  for (const [i, trigger] of triggers.entries()) {
    if (trigger.type !== "source" || trigger.sourceId === undefined) continue;
    if (seen.has(trigger.sourceId)) {
      throw invalid(`triggers[${i}].props.source_id`, "another trigger of the workflow names this source");
    }
    seen.add(trigger.sourceId);
  }
}

/** The host's code of a deployment ({@link workflowCode}) from its steps' components. */
function deploymentCode(workflow: WorkflowRecord, components: ReadonlyMap<string, ComponentRecord>): WorkflowCode {
  const loaded = workflow.steps.map((step) => {
    const component = components.get(step.componentId);
    if (!component) throw notFound("component");
    return { component };
  });
  return workflowCode(workflow, loaded);
}

/** The components and sources the views of these workflows show, each read once. */
async function viewParts(
  deps: Pick<Deps, "components" | "sources">,
  workflows: WorkflowRecord[],
  known = new Map<string, ComponentRecord>(),
) {
  const components = new Map(known);
  const sources = new Map<string, SourceRecord>();
  const component = async (id: string) => {
    if (components.has(id)) return;
    const found = await deps.components.getComponent(id);
    if (found) components.set(id, found);
  };
  for (const workflow of workflows) {
    for (const step of workflow.steps) await component(step.componentId);
    for (const trigger of workflow.triggers) {
      if (trigger.type !== "source" || sources.has(trigger.sourceId)) continue;
      const source = await deps.sources.getSource(trigger.sourceId);
      if (!source) continue;
      sources.set(source.id, source);
      await component(source.componentId);
    }
  }
  return { components, sources } satisfies WorkflowViewParts;
}

async function present(deps: Deps, workflow: WorkflowRecord, known?: Map<string, ComponentRecord>) {
  return workflowView(deps, workflow, await viewParts(deps, [workflow], known));
}

function logFields(workflow: WorkflowRecord) {
  return {
    workflow_id: workflow.id,
    workspace_id: workflow.workspaceId,
    deployment_id: workflow.deploymentId,
    active: workflow.active,
  };
}

/**
 * `POST /workflows`: starts from the template if one is named, checks the body, saves the steps'
 * components, builds the deployment, stores the workflow. With an `external_id` that already names
 * a workflow of the workspace, nothing is made: the same request answers that workflow, another
 * one a 409 (design 1.4). Two such creates at once make one workflow: the store's guard refuses
 * the second, which then answers as a repeat.
 */
export async function createWorkflow(
  deps: Deps,
  caller: Caller,
  given: CreateWorkflowInput,
  options: TriggerDeployOptions = {},
) {
  const external = externalIdOf(given);
  const input = await withTemplate<StepInput, TriggerInput, CreateWorkflowInput>(deps, given);
  const name = workflowName(input.settings?.name);
  const workspace = await workspaceOrDefault(deps, caller, input);
  const existing = external && (await deps.workflows.findWorkflowByExternalId(workspace.id, external.externalId));
  if (external && existing) return repeatedCreate(deps, existing, external.requestHash);
  const projectId = await projectOf(deps, workspace.id, input.project_id);
  // Triggers first: checking them writes nothing, while each step's code is saved as it is
  // checked. Sources a trigger deploys are deployed last, once everything else is known good.
  const checked = await triggerRecords(deps, caller, input.triggers ?? []);
  requireDistinctSources(checked);
  const components = new Map<string, ComponentRecord>();
  const steps = await stepRecords(deps, caller, workspace.id, input.steps ?? [], components);
  const now = deps.clock.nowMs();
  const draft: WorkflowRecord = {
    id: deps.ids.newId("workflow"),
    userId: caller.userId,
    workspaceId: workspace.id,
    projectId,
    name,
    active: input.settings?.auto_deploy === true,
    deploymentId: deps.ids.newId("deployment"),
    ...external,
    steps,
    triggers: [],
    createdAt: now,
    updatedAt: now,
  };
  checkSize({ ...draft, triggers: checked.filter((t) => t.type !== "deploy") });
  const deployed = await deployTriggerSources(deps, caller, draft, checked, options);
  const workflow: WorkflowRecord = { ...draft, triggers: deployed.records };
  let prepared = false;
  try {
    checkSize(workflow);
    await deps.host.prepareWorkflow(deploymentCode(workflow, components));
    prepared = true;
    await deps.workflows.createWorkflow(workflow);
  } catch (error) {
    await discardDeployedSources(deps, caller, workflow.triggers);
    if (prepared) await deps.host.removeWorkflow({ workflowId: workflow.id, ownerId: workflow.workspaceId });
    // Another create with this external id was stored meanwhile: answer as its repeat.
    const winner =
      external && isDomainError(error) && error.code === "conflict"
        ? await deps.workflows.findWorkflowByExternalId(workspace.id, external.externalId)
        : undefined;
    if (external && winner) return repeatedCreate(deps, winner, external.requestHash);
    throw error;
  }
  try {
    await applyAutoSubscriptions(deps, workflow);
    await subscribeSourceTriggers(deps, workflow, deployed.handOver);
    // Its sources were deployed active already: this schedules its timers.
    if (workflow.active) await activateTriggers(deps, caller, workflow, undefined, options);
  } catch (error) {
    await removeWorkflow(deps, caller, workflow, true);
    throw error;
  }
  // Last: from here on the finisher may run the sources' hooks; the workflow is there for them.
  await handOverTriggerSources(deps, deployed.handOver);
  deps.log.info("workflow created", logFields(workflow));
  return present(deps, workflow, components);
}

/**
 * A PUT's fields that only a create takes: a client that sends them means something a PUT does not
 * do (start from a template, deploy on save), so they are refused rather than silently ignored.
 */
function refuseCreateOnlyFields(input: UpdateWorkflowInput): void {
  if (input.template_id !== undefined) {
    throw invalid(
      "template_id",
      "is taken only by POST /v1/workflows (a template starts a new workflow); to change this one, send its steps and triggers",
    );
  }
  if (input.settings?.auto_deploy !== undefined) {
    throw invalid(
      "settings.auto_deploy",
      "is taken only by POST /v1/workflows; send active (true or false) to activate or deactivate this workflow",
    );
  }
}

/**
 * `PUT /workflows/{id}`: `active` alone is the spec's activation. `steps` or `triggers` replace
 * those lists whole, with a new `deployment_id`; ids survive as 1.4 says. A list that is absent
 * is kept. Sources deployed by triggers are deployed anew when `triggers` are given, and those of
 * the previous list deleted. With the `external_id` and the body that last wrote the workflow, it
 * changes nothing and answers the stored workflow (design 1.4).
 */
export async function updateWorkflow(
  deps: Deps,
  caller: Caller,
  id: string,
  input: UpdateWorkflowInput,
  options: TriggerDeployOptions = {},
) {
  refuseCreateOnlyFields(input);
  const external = externalIdOf(input);
  const name = input.settings?.name === undefined ? undefined : workflowName(input.settings.name);
  // Before any step is saved: nothing is made for a request about another account's workflow.
  const current = await requireWorkflow(deps, caller, id);
  if (external) {
    // The request that last wrote the workflow, again: nothing to do (no redeploy, no timer reset).
    if (current.externalId === external.externalId && current.requestHash === external.requestHash) {
      return present(deps, current);
    }
    const holder = await deps.workflows.findWorkflowByExternalId(current.workspaceId, external.externalId);
    if (holder && holder.id !== current.id) {
      throw conflict(`external_id: already names workflow ${holder.id} of this workspace`);
    }
  }
  const active = input.active ?? current.active;
  // Before anything changes: the sources it deployed are not touched while one is deploying.
  if (input.triggers !== undefined || active !== current.active) {
    await requireSettledTriggerSources(
      deps,
      current,
      input.triggers === undefined ? "activate or deactivate the workflow" : "replace its triggers",
    );
  }
  const checked = input.triggers === undefined ? undefined : await triggerRecords(deps, caller, input.triggers);
  if (checked) requireDistinctSources(checked);
  const components = new Map<string, ComponentRecord>();
  const steps =
    input.steps === undefined
      ? current.steps
      : keepStepIds(current.steps, await stepRecords(deps, caller, current.workspaceId, input.steps, components));
  let triggers = current.triggers;
  let handOver: string[] = [];
  if (checked !== undefined && input.triggers !== undefined) {
    const deployed = await deployTriggerSources(deps, caller, { ...current, active }, checked, options);
    handOver = deployed.handOver;
    triggers = keepTriggerIds(
      current.triggers,
      deployed.records,
      input.triggers.map((item) => item.id),
    );
  }
  const redeploy = input.steps !== undefined || input.triggers !== undefined;
  // The stored hash describes the request that last wrote the workflow; a write without an
  // `external_id` is another request, so the next PUT with the old body is not taken for a repeat.
  const { requestHash: _previous, ...unhashed } = current;
  const next: WorkflowRecord = {
    ...unhashed,
    ...external,
    name: name ?? current.name,
    active,
    steps,
    triggers,
    deploymentId: redeploy ? deps.ids.newId("deployment") : current.deploymentId,
    updatedAt: deps.clock.nowMs(),
  };
  const fresh = triggers.filter((t) => !current.triggers.includes(t));
  let deactivated = false;
  // Until the record names them, the sources this request deployed are its own to discard: a
  // failure, a DELETE that removed the workflow meanwhile (its write then finds none) or another
  // PUT that wrote first leaves no source the workflow does not name.
  try {
    checkSize(next);
    if (input.steps !== undefined) {
      const known = await viewParts(deps, [next], components);
      await deps.host.prepareWorkflow(deploymentCode(next, known.components));
    }
    if (current.active && (!next.active || input.triggers !== undefined)) {
      // Not for a record another request has changed since: the write below would refuse it anyway.
      await requireUnchanged(deps, current);
      deactivated = true;
      await deactivateTriggers(deps, caller, current, next, options);
    }
    // Only over the record this request read: another PUT that wrote meanwhile makes this one 409,
    // rather than both answering 200 and the sources the first deployed staying behind unnamed.
    await deps.workflows.updateWorkflow(next, current);
  } catch (error) {
    await discardDeployedSources(deps, caller, fresh);
    const latest = await deps.workflows.getWorkflow(id);
    // Deleted meanwhile: what `prepareWorkflow` made again for it (its function, on AWS) goes too.
    if (!latest) await deps.host.removeWorkflow({ workflowId: id, ownerId: current.workspaceId });
    // Stopped by this request, which then failed (another PUT wrote first, a key in use): the
    // stored workflow's triggers run again if it is active (the triggers it kept, its timers).
    else if (deactivated && latest.active) await activateTriggers(deps, caller, latest, undefined, options);
    // The same PUT with an `external_id`, sent twice at once: the one that lost answers the winner's.
    const repeat =
      external && latest?.externalId === external.externalId && latest.requestHash === external.requestHash;
    if (repeat && isDomainError(error) && error.code === "conflict") return present(deps, latest);
    throw error;
  }
  await resubscribe(deps, caller, current, next, handOver, options);
  // The new sources' jobs, before the other sources' activation: whatever that does, these finish.
  await handOverTriggerSources(deps, handOver);
  // `active: true` again also activates a source left inactive by an activation that failed.
  if (next.active && (!current.active || input.triggers !== undefined || input.active === true))
    await activateTriggers(deps, caller, next, current, options);
  deps.log.info("workflow updated", logFields(next));
  return present(deps, next, components);
}

/**
 * Moves source-trigger subscriptions from the old list of triggers to the new one, and deletes
 * the sources the old list deployed that the new one does not keep.
 */
async function resubscribe(
  deps: Deps,
  caller: Caller,
  previous: WorkflowRecord,
  next: WorkflowRecord,
  handedOver: readonly string[],
  options: TriggerDeployOptions,
) {
  const kept = new Set(next.triggers.flatMap((t) => (t.type === "source" ? [t.sourceId] : [])));
  const dropped = previous.triggers.filter((t) => t.type === "source" && !kept.has(t.sourceId));
  for (const trigger of dropped) {
    if (trigger.type !== "source") continue;
    await deps.subscriptions.deleteSubscription({
      emitterKey: trigger.sourceId,
      listenerId: previous.id,
      eventName: "",
    });
  }
  await deleteDeployedSources(deps, caller, dropped, options);
  await subscribeSourceTriggers(deps, next, handedOver);
}

/**
 * Everything of a workflow, the record last so that a failure half way leaves it in place and
 * repeating the deletion finishes the job: its triggers' effects (the sources it deployed), the
 * subscriptions naming it (as emitter or listener) and its auto subscriptions, its deployment, its
 * events, runs, paused runs and the dead letters of its sends; then its subscriptions and dead letters again,
 * for one made meanwhile.
 */
async function removeWorkflow(
  deps: Deps,
  caller: Caller,
  workflow: WorkflowRecord,
  discard = false,
  options: TriggerDeployOptions = {},
) {
  await removeTriggers(deps, caller, workflow, discard, options);
  await forgetSubscriptionsOf(deps, workflow.id);
  // Its deployment before its events and runs, as a source's code goes before its events: runs in
  // flight end then (locally), so what they store is deleted with the rest, not left behind.
  await deps.host.removeWorkflow({ workflowId: workflow.id, ownerId: workflow.workspaceId });
  await deps.events.deleteAllEvents(workflow.id);
  await deps.workflowRuns.deleteRuns(workflow.id);
  // Its paused runs hold what their steps exported (and, on AWS, a schedule each), counted in the
  // workspace's stored bytes.
  const pausedBytes = await deps.pausedRuns.stateBytesOf(workflow.id);
  await deps.pausedRuns.removeWorkflow(workflow.id);
  await countPausedBytes(deps, workflow, -pausedBytes, deps.clock.nowMs());
  // The dead letters of its sends hold their whole requests, credentials included.
  await deps.deadLetters.deleteDeadLettersOf(workflow.id);
  // A PUT that replaced the triggers meanwhile stored sources this deletion had not read.
  const latest = await deps.workflows.getWorkflow(workflow.id);
  const added = latest?.triggers.filter((trigger) => !workflow.triggers.some((t) => sameTrigger(t, trigger))) ?? [];
  if (latest && added.length > 0) await removeTriggers(deps, caller, { ...latest, triggers: added }, discard, options);
  await deps.workflows.deleteWorkflow(workflow.id);
  await forgetSubscriptionsOf(deps, workflow.id);
  await deps.deadLetters.deleteDeadLettersOf(workflow.id);
}

/** 409 when the stored workflow is no longer the version `read` (another request wrote it since). */
async function requireUnchanged(deps: Deps, read: WorkflowRecord): Promise<void> {
  const stored = await deps.workflows.getWorkflow(read.id);
  if (!stored) throw notFound(`workflow ${read.id}`);
  if (!isVersion(stored, read)) throw changedMeanwhile(read.id);
}

/** Whether two records of a workflow's triggers name the same trigger (a source trigger has no id of its own). */
const sameTrigger = (a: TriggerRecord, b: TriggerRecord) =>
  a.type === "source" ? b.type === "source" && a.sourceId === b.sourceId : b.type !== "source" && a.id === b.id;

/**
 * `DELETE /workflows/{id}`. With `answerByMs` (AWS), the `deactivate()` of a source it deployed
 * that does not fit goes to the deploy finisher ({@link deleteDeployedSources}).
 */
export async function deleteWorkflow(deps: Deps, caller: Caller, id: string, options: TriggerDeployOptions = {}) {
  const workflow = await requireWorkflow(deps, caller, id);
  await requireSettledTriggerSources(deps, workflow, "delete the workflow");
  await removeWorkflow(deps, caller, workflow, false, options);
  deps.log.info("workflow deleted", logFields(workflow));
  return { id: workflow.id, deleted: true as const };
}

/**
 * `GET /workflows/{id}`. The spec's optional `org_id` must then be the workflow's workspace: a
 * workflow is "not found" in any other, as in one the caller does not belong to.
 */
export async function getWorkflow(deps: Deps, caller: Caller, id: string, orgId?: string) {
  const workflow = await requireWorkflow(deps, caller, id);
  if (orgId !== undefined && orgId !== workflow.workspaceId) throw notFound("workflow");
  return present(deps, workflow);
}

async function presentPage(deps: Deps, page: Page<WorkflowRecord>, query: PageQuery) {
  const parts = await viewParts(deps, page.items);
  return pageEnvelope(
    page,
    (workflow) => workflow.id,
    (workflow) => workflowView(deps, workflow, parts),
    query,
  );
}

/** `GET /users/me/workflows`: the workflows the caller created, newest first. */
export async function listUserWorkflows(deps: Deps, caller: Caller, page: PageQuery) {
  return presentPage(deps, await deps.workflows.listWorkflowsOfUser(caller.userId, page), page);
}

/** `GET /workspaces/{id}/workflows`: the workflows of a workspace the caller belongs to, newest first. */
export async function listWorkspaceWorkflows(deps: Deps, caller: Caller, workspaceId: string, page: PageQuery) {
  const workspace = await requireWorkspace(deps, caller, workspaceId);
  return presentPage(deps, await deps.workflows.listWorkflowsOfWorkspace(workspace.id, page), page);
}
