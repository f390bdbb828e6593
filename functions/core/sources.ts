/**
 * Deployed sources (`dc_`) and their lifecycle (component-model.md "States and transitions"):
 * deploy runs `deploy()` then `activate()`; update runs `deactivate()`, swaps code and props, then
 * `activate()`; delete runs `deactivate()` and removes. An inactive source runs no hooks but
 * `deactivate()` on the way in, has no timer, and its endpoint answers as documented.
 */

import type { Deps } from "#core/ports/deps";
import { requireSource, requireWorkspace } from "./access.ts";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { ACCOUNT_ERROR } from "./app-accounts.ts";
import {
  type ComponentRecord,
  DEPLOY_STEPS,
  type DeployStep,
  type Json,
  type PropDescription,
  SEALED_SECRET,
  type SourceRecord,
  type SourceSettings,
  type StoredPropValue,
  UPDATE_STEPS,
} from "./component-model.ts";
import {
  type ComponentSourceInput,
  findComponent,
  givesCode,
  registryComponent,
  saveComponentOf,
} from "./components.ts";
import { conflict, DomainError, invalid, isDomainError, notFound } from "./errors.ts";
import {
  IDEMPOTENCY_HEADER,
  IDEMPOTENCY_KEY_TTL_MS,
  keyReusedWithOtherRequest,
  keyStillInFlight,
  requireIdempotencyKey,
} from "./idempotency-keys.ts";
import type { Caller } from "./identity.ts";
import { requireDisplayableName } from "./names.ts";
import { type PageQuery, pageEnvelope } from "./pagination.ts";
import { isSecretProp, propTypeOf } from "./prop-types.ts";
import {
  configuredPropsView,
  isSealed,
  mergeDynamicProps,
  sealSecretValues,
  slugify,
  type ValidatedProps,
} from "./props.ts";
import { redactPaths } from "./redact-paths.ts";
import { resolveComponentProps } from "./resolve-props.ts";
import { interfaceContext, invokeSource, loadComponent, probeSource, propsOf, sourceCode } from "./source-runs.ts";
import { applyAutoSubscriptions, forgetSubscriptionsOf, subscribeWorkflow } from "./subscriptions.ts";
import { epochSeconds } from "./time.ts";
import { requestHash } from "./workflow-external-ids.ts";

export type SourceDeps = Deps;

/** Where a source's code comes from, with the spec's precedence (component_id first). */
export interface ComponentChoice extends ComponentSourceInput {
  component_id?: string | undefined;
  key?: string | undefined;
}

export interface CreateSourceInput extends ComponentChoice, WorkspaceChoice {
  name?: string | undefined;
  configured_props?: Record<string, unknown> | undefined;
}

export interface UpdateSourceInput extends ComponentChoice {
  name?: string | undefined;
  configured_props?: Record<string, unknown> | undefined;
  active?: boolean | undefined;
}

function hasChoice(input: ComponentChoice): boolean {
  return (
    input.component_id !== undefined ||
    input.key !== undefined ||
    input.component_entry !== undefined ||
    givesCode(input)
  );
}

/** The component a create or update names: `component_id`, else code, else files, else URL, else registry `key`. */
async function chooseComponent(deps: SourceDeps, caller: Caller, input: ComponentChoice): Promise<ComponentRecord> {
  let component: ComponentRecord;
  if (input.component_id !== undefined) {
    component = await findComponent(deps, caller, input.component_id).catch((error: unknown) => {
      throw isDomainError(error) && error.code === "not_found" ? invalid("component_id", "no such component") : error;
    });
  } else if (givesCode(input) || input.component_entry !== undefined) {
    component = await saveComponentOf(deps, caller.userId, input);
  } else if (input.key !== undefined) {
    component = await registryComponent(deps, input.key).catch((error: unknown) => {
      throw isDomainError(error) && error.code === "not_found"
        ? invalid("key", "no registry component has this key")
        : error;
    });
  } else {
    throw new DomainError("validation", "one of component_id, component_code, component_url or key is required", [
      { field: "component_id", message: "is required when component_code, component_url and key are absent" },
    ]);
  }
  if (component.metadata.type === "action") {
    throw invalid("component_code", "is an action; only sources can be deployed as sources");
  }
  return component;
}

/**
 * Validates the configured props against the component's props; when the component has
 * `additionalProps`, runs it with the static props configured and validates the final set.
 * `kept` (an update) are the values the source had: each one the code still declares is used
 * where `input` does not give that prop ({@link KeptProps}).
 */
async function resolveProps(
  deps: SourceDeps,
  draft: SourceRecord,
  component: ComponentRecord,
  input: Record<string, unknown> | undefined,
  kept: KeptProps = NOTHING_KEPT,
): Promise<{ validated: ValidatedProps; definitions?: PropDescription[] }> {
  const staticDefs = component.metadata.props;
  return resolveComponentProps(deps, draft.workspaceId, component, input, {
    fieldPrefix: "configured_props",
    over: (defs, given) => kept.over(defs, given),
    askAdditionalProps: async (first) => {
      const probe = await withProps(deps, draft, first, kept);
      // The runtime hands the previous prop definitions to additionalProps(previousPropDefs).
      const result = await probeSource(deps, probe, component, "additionalProps", staticDefs as unknown as Json);
      if (result.error)
        throw invalid("configured_props", `additionalProps failed: ${redactPaths(result.error.message)}`);
      return mergeDynamicProps(staticDefs, result.additionalProps ?? []);
    },
  });
}

/**
 * The configuration a source had, carried over an update (`PUT` with new code or with some of
 * `configured_props`; issue 12, item 10: the spec's update body has no `configured_props`, so a
 * new code must not cost the source its configuration):
 * - a stored value is kept for every prop the new definitions still declare, except static props
 *   and alerts (no value of their own), and except a value equal to the previous code's
 *   `default` (it was the default, so the new code's default applies);
 * - a secret is kept only where the prop is still a secret: opened here (trusted code) so it is
 *   validated like any value, and stored again as the very sealed value it was, never sealed
 *   anew nor shown; a secret whose prop stopped being secret is not carried (it would appear in
 *   clear in `configured_props`), so a required one must be given again;
 * - what the request gives is merged over it, prop by prop; `null` counts as not given (back to
 *   the default, or absent); a prop the new code no longer declares is dropped.
 */
interface KeptProps {
  /** The input to validate against `defs`: the kept values they declare, `given` over them. */
  over(defs: PropDescription[], given: Record<string, unknown> | undefined): Record<string, unknown> | undefined;
  /** The sealed value a secret prop keeps, when its validated value is the one that was kept. */
  sealedFor(name: string, validated: Json | undefined): StoredPropValue | undefined;
}

const NOTHING_KEPT: KeptProps = { over: (_defs, given) => given, sealedFor: () => undefined };

async function keptProps(
  deps: Pick<Deps, "secrets">,
  stored: Record<string, StoredPropValue>,
  previousDefs: PropDescription[],
): Promise<KeptProps> {
  const previous = new Map(previousDefs.map((def) => [def.name, def]));
  const values = new Map<string, Json>();
  const secrets = new Map<string, { clear: string; sealed: StoredPropValue }>();
  const opening: Promise<void>[] = [];
  for (const [name, value] of Object.entries(stored)) {
    const def = previous.get(name);
    if (def?.default !== undefined && JSON.stringify(def.default) === JSON.stringify(value)) continue;
    if (!isSealed(value)) values.set(name, value);
    // Opened at once: on a cold AWS container each one waits for KMS.
    else
      opening.push(
        deps.secrets.open(value[SEALED_SECRET]).then((clear) => void secrets.set(name, { clear, sealed: value })),
      );
  }
  await Promise.all(opening);
  return {
    over(defs, given) {
      const merged: Record<string, unknown> = {};
      for (const def of defs) {
        if (def.static !== undefined || propTypeOf(def.type).displayOnly) continue;
        const secret = secrets.get(def.name);
        if (secret !== undefined && isSecretProp(def)) merged[def.name] = secret.clear;
        else if (values.has(def.name)) merged[def.name] = values.get(def.name);
      }
      for (const [name, value] of Object.entries(given ?? {})) {
        // `__proto__` stays an own key: validation reports it as not a prop.
        Object.defineProperty(merged, name, { value, enumerable: true, writable: true, configurable: true });
      }
      return merged;
    },
    sealedFor(name, validated) {
      const secret = secrets.get(name);
      return secret !== undefined && secret.clear === validated ? secret.sealed : undefined;
    },
  };
}

async function withProps(
  deps: SourceDeps,
  source: SourceRecord,
  validated: ValidatedProps,
  kept: KeptProps = NOTHING_KEPT,
): Promise<SourceRecord> {
  const keep = new Map<string, StoredPropValue>();
  for (const name of validated.secretNames) {
    const sealed = kept.sealedFor(name, validated.values[name]);
    if (sealed !== undefined) keep.set(name, sealed);
  }
  const toSeal = validated.secretNames.filter((name) => !keep.has(name));
  const configuredProps = await sealSecretValues(deps.secrets, validated.values, toSeal);
  for (const [name, sealed] of keep) configuredProps[name] = sealed;
  const next: SourceRecord = { ...source, configuredProps };
  delete next.timer;
  if (validated.timer) next.timer = validated.timer;
  if (validated.http) next.endpointKey = source.endpointKey ?? deps.ids.newSecret(18);
  else delete next.endpointKey;
  return next;
}

/**
 * Runs a lifecycle hook; a hook that throws fails the operation with its message. A `deactivate`
 * that cannot run because an account of the source is gone is skipped: it could not reach the
 * app anyway, and the source must stay removable (its `$errors` says what happened).
 */
async function runHook(
  deps: SourceDeps,
  source: SourceRecord,
  component: ComponentRecord,
  hook: "deploy" | "activate" | "deactivate",
) {
  if (!component.metadata.hooks.includes(hook)) return;
  const { result } = await invokeSource(deps, source, component, hook);
  if (hook === "deactivate" && result.error?.name === ACCOUNT_ERROR) return;
  // Another request deleted the source meanwhile (its code went first): answered as after it.
  if (result.error && deps.host.wasRemoved?.(source.id)) throw notFound("source");
  if (result.error) {
    const message = `the ${hook} hook failed: ${redactPaths(result.error.message)}`;
    throw new DomainError("validation", message, [{ field: "component_code", message }]);
  }
}

/**
 * How long a deploy may stay unfinished before the recovery sweep takes it for interrupted: 15
 * minutes, Lambda's longest timeout, so no function that could still be deploying it is running.
 */
export const DEPLOY_ABANDONED_AFTER_MS = 15 * 60 * 1000;

/**
 * `POST /sources`: saves the source marked `deployingSince`, builds its code, subscribes the
 * owner's auto-subscribed listeners to it, runs `deploy()` and `activate()`, starts its timer, and
 * last clears the mark. A failure removes the source; an interruption (the process or function
 * killed) leaves it marked, and {@link recoverInterruptedDeploys} removes it. `workflowId` names
 * the workflow deploying it as its trigger (never a field of the request body). With
 * `idempotencyKey` (the `Idempotency-Key` header), a create the user already made with that key
 * answers its source again (#core/idempotency-keys). With `answerByMs` (epoch ms by which the
 * caller must answer: an AWS route), the steps after the save that do not fit in the time left go
 * to the deploy finisher ({@link runDeploySteps}), and the source is answered still deploying.
 *
 * A workflow's trigger source (`workflowId`) is deployed with its workflow's `active`: an inactive
 * one runs `deploy()` but not `activate()`, and gets no timer. With `deferHandOver`, a step that
 * does not fit is written on the record but the finisher is not invoked: the workflow hands it
 * over ({@link handOverDeploy}) once it is stored, so that the finisher never runs for a workflow
 * that its request then fails to make.
 */
export async function deploySource(
  deps: SourceDeps,
  caller: Caller,
  input: CreateSourceInput,
  options: {
    workflowId?: string;
    idempotencyKey?: string;
    answerByMs?: number;
    active?: boolean;
    deferHandOver?: true;
  } = {},
) {
  if (input.name !== undefined) requireDisplayableName("name", input.name);
  const key = options.idempotencyKey === undefined ? undefined : requireIdempotencyKey(options.idempotencyKey);
  const hash = key === undefined ? "" : requestHash(input);
  if (key !== undefined) {
    const repeat = await repeatedCreate(deps, caller, key, hash);
    if (repeat) return repeat;
  }
  const workspace = await workspaceOrDefault(deps, caller, input);
  const component = await chooseComponent(deps, caller, input);
  const now = deps.clock.nowMs();
  // The spec's default is the slug of the component's name (a registry key often differs from it).
  const name = input.name ?? slugify(component.name);
  const draft: SourceRecord = {
    id: deps.ids.newId("source"),
    userId: caller.userId,
    workspaceId: workspace.id,
    componentId: component.id,
    name,
    nameSlug: slugify(name),
    configuredProps: {},
    active: options.active ?? true,
    createdAt: now,
    updatedAt: now,
  };
  if (options.workflowId !== undefined) draft.workflowId = options.workflowId;
  const { validated, definitions } = await resolveProps(deps, draft, component, input.configured_props);
  const prepared = await withProps(deps, draft, validated);
  if (definitions) prepared.propDefinitions = definitions;
  // Saved first, marked: from here on every interruption leaves a record the sweep finds.
  prepared.deployingSince = now;
  const claim =
    key === undefined
      ? undefined
      : {
          userId: caller.userId,
          key,
          requestHash: hash,
          sourceId: prepared.id,
          createdAt: now,
          expiresAt: now + IDEMPOTENCY_KEY_TTL_MS,
        };
  let source: SourceRecord;
  try {
    source = await deps.sources.createSource(prepared, claim);
  } catch (error) {
    // A create with the same key that began meanwhile holds it: answer as to a repeat.
    const repeat =
      key !== undefined && isDomainError(error) && error.code === "conflict"
        ? await repeatedCreate(deps, caller, key, hash)
        : undefined;
    if (repeat) return repeat;
    throw error;
  }
  try {
    // A defaulted name follows the slug the store made unique (`new-requests-1`).
    if (input.name === undefined && source.name !== source.nameSlug) {
      source = await deps.sources.updateSource({ ...source, name: source.nameSlug });
    }
    source = await runDeploySteps(deps, source, component, "prepare", budgetOf(options));
  } catch (error) {
    await removeSource(deps, source);
    throw error;
  }
  return sourceView(deps, source, component);
}

/**
 * What creating or updating a source's function takes at most before the host reports it
 * `pending` (on AWS: `CreateFunction` or `UpdateFunctionCode`, then waiting for the function): the
 * step starts in a request only with this much time left, and waits for the function no longer
 * than the request has (docs/aws.md "Deploy time budget").
 */
export const PREPARE_BUDGET_MS = 5_000;

/**
 * The time a request has for the steps of a deploy or an update (AWS: `answerByMs`); a step that
 * does not fit is handed to the deploy finisher, at once or (`deferHandOver`, a workflow's trigger
 * source) by the caller once it has stored what the source belongs to ({@link handOverDeploy}).
 */
interface StepBudget {
  answerByMs: number;
  deferHandOver: boolean;
}

function budgetOf(options: { answerByMs?: number; deferHandOver?: true }): StepBudget | undefined {
  return options.answerByMs === undefined
    ? undefined
    : { answerByMs: options.answerByMs, deferHandOver: options.deferHandOver === true };
}

/**
 * Whether a step that needs `needsMs` runs now: yes without a budget or without a finisher (local
 * mode, or a deployment without one), or when it fits in the time left; else "later" (the finisher's).
 */
function stepTiming(deps: SourceDeps, budget: StepBudget | undefined, needsMs: number) {
  if (budget === undefined || deps.deployFinisher === undefined) return "now" as const;
  if (deps.clock.nowMs() + needsMs <= budget.answerByMs) return "now" as const;
  return "later" as const;
}

/** What a step needs of the request's time: {@link PREPARE_BUDGET_MS} for the function, a hook's whole limit. */
const stepNeedsMs = (deps: SourceDeps, step: DeployStep) =>
  step === "prepare" ? PREPARE_BUDGET_MS : deps.runtime.invocationTimeoutMs;

/**
 * `prepare` within a budget: the function is made (and waited for no later than the request's
 * deadline). False when it was made but is not ready yet: the finisher's `prepare` waits for it.
 */
async function prepareWithin(
  deps: SourceDeps,
  source: SourceRecord,
  component: ComponentRecord,
  budget: StepBudget | undefined,
): Promise<boolean> {
  const readyBy = budget && deps.deployFinisher ? { readyByMs: budget.answerByMs } : undefined;
  const outcome = await deps.host.prepare(sourceCode(source, component), readyBy);
  return outcome !== "pending" || readyBy === undefined;
}

type CreateStep = (typeof DEPLOY_STEPS)[number];

/**
 * Read before each write of a deploy or an update after its first: on AWS a `DELETE` may have
 * marked the source meanwhile (`deployStep: "delete"`, {@link deferDeletion}), and writing over
 * that mark would bring a deleted source back. The source as it now reads when so marked (the work
 * stops and answers it: in the finisher, the finisher that holds the source goes on with the
 * deletion, {@link finishDeploy}; in a request, the deletion's own job does), else undefined. One
 * removed meanwhile fails the work, not found.
 */
async function markedForDeletion(deps: SourceDeps, source: SourceRecord): Promise<SourceRecord | undefined> {
  const latest = await deps.sources.getSource(source.id);
  if (!latest) throw notFound(`source ${source.id}`);
  return latest.deployStep === "delete" ? latest : undefined;
}

/**
 * The steps of a deploy after its source is saved, from step `from` on (#core/component-model
 * `DEPLOY_STEPS`): `prepare` (the source's function, then the owner's auto subscriptions, so that
 * what `deploy()` logs or throws reaches them), the `deploy()` and `activate()` hooks (an inactive
 * source, a trigger of an inactive workflow, skips `activate()`), and last the timer (when active)
 * and the write that clears the mark. Returns the source as saved, or as a `DELETE` marked it
 * meanwhile ({@link markedForDeletion}: the steps stop there). In the finisher (`track`), a
 * workflow's trigger source is subscribed to by its workflow before that write
 * ({@link subscribeTriggerWorkflow}), as its workflow's request does for one deployed in it.
 *
 * With a budget and a deploy finisher, a step starts only if it fits in the time left:
 * `prepare` with {@link PREPARE_BUDGET_MS} left (and no wait for its function past `answerByMs`),
 * a hook with its whole time limit left. A hook is not started with less and cut short: it talks
 * to third parties and may not be safe to run twice, so it runs whole, here or in the finisher.
 * The first step that does not fit is written on the record (`deployStep`) and handed to the
 * finisher, which goes on from it ({@link finishDeploy}); the source stays marked meanwhile.
 */
async function runDeploySteps(
  deps: SourceDeps,
  source: SourceRecord,
  component: ComponentRecord,
  from: CreateStep,
  budget?: StepBudget,
  track = false,
): Promise<SourceRecord> {
  let current = source;
  for (const step of DEPLOY_STEPS.slice(DEPLOY_STEPS.indexOf(from))) {
    if (step !== "prepare" && !component.metadata.hooks.includes(step)) continue;
    if (step === "activate" && !current.active) continue;
    if (stepTiming(deps, budget, stepNeedsMs(deps, step)) === "later") {
      return deferDeploy(deps, current, step, budget?.deferHandOver === true);
    }
    // The finisher shows where it is; a request does not spend a write on it.
    if (track && current.deployStep !== step) {
      const deleting = await markedForDeletion(deps, current);
      if (deleting) return deleting;
      current = await deps.sources.updateSource({ ...current, deployStep: step });
    }
    if (step === "prepare") {
      if (!(await prepareWithin(deps, current, component, budget))) {
        return deferDeploy(deps, current, "prepare", budget?.deferHandOver === true);
      }
      await applyAutoSubscriptions(deps, current);
    } else {
      await runHook(deps, current, component, step);
    }
  }
  const deleting = await markedForDeletion(deps, current);
  if (deleting) return deleting;
  if (track && current.workflowId !== undefined) await subscribeTriggerWorkflow(deps, current, current.workflowId);
  if (current.active && current.timer) await deps.timers.schedule({ sourceId: current.id }, current.timer);
  const { deployingSince: _done, deployStep: _step, ...deployed } = current;
  current = await deps.sources.updateSource(deployed);
  deps.log.info("source deployed", sourceLogFields(current));
  return current;
}

async function deferDeploy(
  deps: SourceDeps,
  source: SourceRecord,
  step: DeployStep,
  deferHandOver = false,
): Promise<SourceRecord> {
  const marked = await deps.sources.updateSource({ ...source, deployStep: step });
  if (!deferHandOver) await deps.deployFinisher?.finishLater(source.id);
  const fields = { ...sourceLogFields(source), deploy_step: step };
  deps.log.info(`source ${source.updateFrom ? "update" : "deploy"} goes on in the background`, fields);
  return marked;
}

/**
 * Hands a create deployed with `deferHandOver` to the deploy finisher (a workflow's trigger
 * source, once its workflow is stored and subscribed). A hand-over that fails does not fail the
 * caller, whose workflow is stored already: the deploy fails in place, as one failing in the
 * finisher (`deploy_state: "failed"`, what it made removed, the record left to the sweep). False then.
 */
export async function handOverDeploy(deps: SourceDeps, sourceId: string): Promise<boolean> {
  try {
    await deps.deployFinisher?.finishLater(sourceId);
    return true;
  } catch (error) {
    const source = await deps.sources.getSource(sourceId);
    if (source) await failDeploy(deps, source, error);
    return false;
  }
}

/**
 * The finisher's subscription of a workflow to its trigger source, once the source's hooks ran:
 * the subscription named by the workflow's trigger. A workflow that no longer has this source as
 * a trigger fails the deploy (it cannot be deleted nor its triggers replaced while the source
 * deploys, so this is a source nothing would ever remove but the sweep).
 */
async function subscribeTriggerWorkflow(deps: SourceDeps, source: SourceRecord, workflowId: string) {
  const workflow = await deps.workflows.getWorkflow(workflowId);
  const trigger = workflow?.triggers.find((item) => item.type === "source" && item.sourceId === source.id);
  if (!workflow || trigger?.type !== "source") {
    throw new DomainError("validation", `its workflow ${workflowId} no longer has it as a trigger`);
  }
  await subscribeWorkflow(deps, workflow, source.id, trigger.subscriptionId);
}

/**
 * Where a source is in its deploy, as a workflow deleting, activating or deactivating the
 * sources it deployed needs to know (#core/workflow-triggers):
 * - `deployed`: not marked (a failed update's source included: it stays, inactive or as before);
 * - `failed`: a create that failed in the background, or that began more than
 *   {@link DEPLOY_ABANDONED_AFTER_MS} ago (abandoned): nothing of it runs, the sweep removes it;
 * - `deploying`: a create or an update still in progress, in a request or in the finisher;
 * - `deleting`: a deletion whose `deactivate()` was handed to the finisher (it is stopped, and
 *   goes, or fails and waits for a `DELETE` or the sweep): nothing of the workflow's to do.
 */
export function deployProgress(
  deps: Pick<Deps, "clock">,
  source: SourceRecord,
): "deployed" | "failed" | "deploying" | "deleting" {
  if (source.deployingSince === undefined) return "deployed";
  if (source.deployStep === "delete") return "deleting";
  if (source.updateFrom !== undefined) return "deploying";
  const abandoned = source.deployingSince < deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS;
  return source.deployError !== undefined || abandoned ? "failed" : "deploying";
}

/**
 * Removes a create that is not finished, without running hooks, as a failed deploy is undone and
 * as the sweep would: a failed or abandoned one ({@link deployProgress}), or one its caller deployed
 * with `deferHandOver` and never handed over. A source that is not such a create is left alone.
 */
export async function discardUnfinishedDeploy(deps: SourceDeps, source: SourceRecord): Promise<void> {
  if (source.deployingSince === undefined || source.updateFrom !== undefined) return;
  await removeSource(deps, source);
  deps.log.info("unfinished deploy removed", sourceLogFields(source));
}

/** What {@link finishDeploy} did. */
export type FinishOutcome = "deployed" | "deleted" | "failed" | "skipped";

/**
 * The deploy finisher's use case (AWS: `functions/internal/deploy-finisher.ts`, invoked
 * asynchronously by a deploying route): goes on with a deploy or an update (`updateFrom`) from the
 * step its request left (`deployStep`), every step with its whole time, and clears the mark.
 * `mustEndByMs` is when the finisher itself is ended (its function's timeout).
 *
 * - Nothing to do ("skipped") when the source is gone, deployed, failed, or not handed over; when
 *   another finisher holds it (Lambda may deliver an asynchronous event twice: a lease under the
 *   run lock, `deploy:<source id>`, keeps the second out); or when the finisher could still be
 *   running once the recovery sweep takes the source for abandoned ({@link DEPLOY_ABANDONED_AFTER_MS}
 *   after its deploy began): then the sweep recovers it, as any interrupted deploy or update.
 * - A deletion (`deployStep: "delete"`) runs `deactivate()` and removes the source ("deleted"), or
 *   keeps it failed ({@link finishDeletion}).
 * - A create's step that fails ("failed") removes what the deploy made (function, timer,
 *   subscriptions) and keeps the record, still marked, with the reason (`deployError`): reads show
 *   `deploy_state: "failed"` and `deploy_error` until the source is deleted or swept. A hook's
 *   failure is its message; a failure of Sluice itself is logged and shown as such, without detail.
 *   An update's failure is told the same way, and leaves what {@link updateSource} says.
 */
export async function finishDeploy(deps: SourceDeps, sourceId: string, mustEndByMs: number): Promise<FinishOutcome> {
  const waiting = (source: SourceRecord | undefined): source is SourceRecord & { deployingSince: number } =>
    source?.deployingSince !== undefined && source.deployStep !== undefined && source.deployError === undefined;
  const first = await deps.sources.getSource(sourceId);
  if (!waiting(first)) return "skipped";
  if (mustEndByMs > first.deployingSince + DEPLOY_ABANDONED_AFTER_MS) {
    deps.log.warn("background deploy left to the sweep: it started too late to end before it", sourceLogFields(first));
    return "skipped";
  }
  const now = deps.clock.nowMs();
  const lease = await deps.runLock.acquire(`deploy:${sourceId}`, { leaseMs: mustEndByMs - now, waitUntilMs: now });
  if (!lease) return "skipped";
  try {
    // Read again under the lease: a finisher that held it before may have finished the deploy.
    const source = await deps.sources.getSource(sourceId);
    if (!waiting(source)) return "skipped";
    const step = source.deployStep as DeployStep;
    if (step === "delete") return await finishDeletion(deps, source);
    let left: SourceRecord;
    if (source.updateFrom !== undefined) {
      const outcome = await runUpdate(deps, source, step, undefined);
      if (outcome.failed) return "failed";
      left = outcome.source;
    } else {
      try {
        const component = await loadComponent(deps, source.componentId);
        if (!component) throw notFound("component");
        left = await runDeploySteps(deps, source, component, step as CreateStep, undefined, true);
      } catch (error) {
        await failDeploy(deps, source, error);
        return "failed";
      }
    }
    if (left.deployStep !== "delete") return "deployed";
    // A DELETE came meanwhile; its own job finds this lease and is skipped, so the deletion is ours.
    deps.log.info("background deploy stopped: the source is being deleted", sourceLogFields(source));
    return await finishDeletion(deps, left);
  } finally {
    await lease.release().catch(() => {});
  }
}

/** The reason a background step's failure is shown with: a domain error's message, else none. */
function failureReason(deps: SourceDeps, source: SourceRecord, error: unknown): string {
  const what = source.deployStep === "delete" ? "deletion" : source.updateFrom ? "update" : "deploy";
  deps.log.error(`background ${what} failed`, {
    ...sourceLogFields(source),
    error: String(error),
  });
  return isDomainError(error)
    ? error.message
    : "the deploy could not be finished because of an internal error (the deploy finisher's logs have it)";
}

/** A background deploy's failure: what it made is removed, the record kept with the reason. */
async function failDeploy(deps: SourceDeps, source: SourceRecord, error: unknown): Promise<void> {
  const reason = failureReason(deps, source, error);
  await removeSourceParts(deps, source);
  // Deleted meanwhile (a `DELETE` is allowed while it deploys): nothing is left to mark.
  const current = await deps.sources.getSource(source.id);
  if (!current) return;
  const { deployStep: _step, ...failed } = current;
  await deps.sources.updateSource({ ...failed, deployingSince: source.deployingSince, deployError: reason });
}

/**
 * The answer to a create whose key the user already used: its source when the request is the
 * same and its deploy finished; 409 while it is still deploying; 422 for another request. None
 * when the key is unknown, expired, or its source is gone (the key went with it), or its deploy
 * was abandoned (then removed here, as the sweep would).
 */
async function repeatedCreate(deps: SourceDeps, caller: Caller, key: string, hash: string) {
  const claim = await deps.sources.findDeployClaim(caller.userId, key, deps.clock.nowMs());
  if (!claim) return undefined;
  if (claim.requestHash !== hash) throw keyReusedWithOtherRequest();
  // Through the access check: a key never reaches a source its user can no longer manage.
  const source = await requireSource(deps, caller, claim.sourceId);
  // Its key ends with it (#core/idempotency-keys): the deletion is to end first.
  if (source.deployStep === "delete" && source.deployError === undefined) {
    throw conflict(
      `source ${source.id}, created with this ${IDEMPOTENCY_HEADER}, is being deleted; retry when it is gone`,
    );
  }
  // A source being updated was deployed: its create is done, whatever the update does.
  if (source.deployingSince !== undefined && source.updateFrom === undefined) {
    const failed = source.deployError !== undefined;
    if (!failed && source.deployingSince >= deps.clock.nowMs() - DEPLOY_ABANDONED_AFTER_MS) {
      throw keyStillInFlight(source.id);
    }
    // Abandoned or failed, and not swept yet: what the sweep would do, then this create runs afresh.
    await removeSource(deps, source);
    return undefined;
  }
  return getSource(deps, caller, source.id);
}

/**
 * Recovers the sources whose deploy or update began before `startedBefore` and never finished:
 * their process or function was killed mid-way (local mode at start, with its start time; on AWS
 * the deploy sweeper, every few minutes, with {@link DEPLOY_ABANDONED_AFTER_MS}). An unfinished
 * create is removed; an unfinished update is stopped where it is ({@link stopInterruptedUpdate}).
 * No hook runs, as when a deploy fails; one that cannot be recovered is logged and left to the
 * next sweep. Returns how many it recovered.
 */
export async function recoverInterruptedDeploys(deps: SourceDeps, startedBefore: number): Promise<number> {
  const abandoned = await deps.sources.listDeployingSources(startedBefore);
  let recovered = 0;
  for (const source of abandoned) {
    const fields = { ...sourceLogFields(source), deploying_since: source.deployingSince };
    const what = source.updateFrom
      ? "interrupted update stopped"
      : source.deployStep === "delete"
        ? "interrupted deletion removed"
        : "interrupted deploy removed";
    // One that cannot be recovered now (its function, a store) must not keep the others, or a
    // local server's start, from going on: the next sweep tries it again.
    try {
      if (source.updateFrom) await stopInterruptedUpdate(deps, source);
      else await removeSource(deps, source);
      recovered += 1;
      deps.log.warn(what, fields);
    } catch (error) {
      deps.log.error(what.replace(/ (stopped|removed)$/, " not $1"), { ...fields, error: String(error) });
    }
  }
  return recovered;
}

/** The fields of a source's lifecycle lines: ids only, never its props (they can hold secrets). */
function sourceLogFields(source: SourceRecord) {
  return {
    source_id: source.id,
    workspace_id: source.workspaceId,
    component_id: source.componentId,
    active: source.active,
  };
}

/** The record's settings, as an update keeps them to put them back ({@link SourceRecord.updateFrom}). */
function settingsOf(source: SourceRecord): SourceSettings {
  const settings: SourceSettings = {
    componentId: source.componentId,
    name: source.name,
    nameSlug: source.nameSlug,
    configuredProps: source.configuredProps,
    active: source.active,
  };
  if (source.propDefinitions !== undefined) settings.propDefinitions = source.propDefinitions;
  if (source.endpointKey !== undefined) settings.endpointKey = source.endpointKey;
  if (source.timer !== undefined) settings.timer = source.timer;
  return settings;
}

/** `source` with `settings` instead of its own (the optional ones absent where `settings` has none). */
function withSettings(source: SourceRecord, settings: SourceSettings): SourceRecord {
  const next: SourceRecord = { ...source, ...settings };
  for (const key of ["propDefinitions", "endpointKey", "timer"] as const) {
    if (settings[key] === undefined) delete next[key];
  }
  return next;
}

/** The record with no deploy mark, step, error nor update in progress. */
function unmarked(source: SourceRecord): SourceRecord {
  const { deployingSince: _since, deployStep: _step, deployError: _error, updateFrom: _from, ...rest } = source;
  return rest;
}

/**
 * `PUT /sources/{id}`: `deactivate()`, swap code, props, name and `active`, then `activate()` if
 * active (docs/components.md "Updating a source"). Nothing changes until the request is checked
 * (the component read, the props validated); then the new settings are saved at once, marked as
 * an update in progress (`deployingSince`, and `updateFrom`: the settings they replace), and the
 * steps run ({@link runUpdate}): the previous settings' timer stops and their `deactivate()` runs,
 * the new code's function is made, the new settings' `activate()` runs, their timer starts, and a
 * last write clears the mark.
 *
 * With `answerByMs` (AWS), the steps take the time left as a create's do: the first that does not
 * fit goes to the deploy finisher, and the source reads `deploy_state: "deploying"` until it is
 * done. A `PUT` while another update or the create runs is 409. What a failure or an interruption
 * leaves is in {@link runUpdate} and {@link stopInterruptedUpdate}.
 */
export async function updateSource(
  deps: SourceDeps,
  caller: Caller,
  id: string,
  input: UpdateSourceInput,
  options: { answerByMs?: number } = {},
) {
  if (input.name !== undefined) requireDisplayableName("name", input.name);
  const current = await requireSource(deps, caller, id);
  refuseWhileDeploying(current);
  const currentComponent = await loadComponent(deps, current.componentId);
  if (!currentComponent) throw notFound("component");
  const component = hasChoice(input) ? await chooseComponent(deps, caller, input) : currentComponent;
  const active = input.active ?? true;
  const name = input.name ?? current.name;

  let draft: SourceRecord = {
    ...unmarked(current),
    componentId: component.id,
    name,
    nameSlug: input.name === undefined ? current.nameSlug : slugify(input.name),
    active,
    updatedAt: deps.clock.nowMs(),
  };
  if (input.configured_props !== undefined || component.id !== current.componentId) {
    const kept = await keptProps(deps, current.configuredProps, propsOf(current, currentComponent));
    const { validated, definitions } = await resolveProps(deps, draft, component, input.configured_props, kept);
    draft = await withProps(deps, draft, validated, kept);
    if (definitions) draft.propDefinitions = definitions;
    else delete draft.propDefinitions;
  }
  const marked = await markUpdate(deps, current, draft);
  const { source, failed, error } = await runUpdate(deps, marked, "deactivate", budgetOf(options));
  if (failed) throw error;
  return sourceView(deps, source, component);
}

function refuseWhileDeploying(source: SourceRecord) {
  if (source.deployingSince === undefined) return;
  if (source.deployStep === "delete") throw conflict(`source ${source.id} is being deleted`);
  const doing = source.updateFrom ? "updated" : "deployed";
  throw conflict(
    source.deployError === undefined
      ? `source ${source.id} is still being ${doing}; update it when its deploy_state is gone`
      : `source ${source.id} failed to deploy (its deploy_error says why); delete it and deploy again`,
  );
}

/** How long {@link markUpdate} holds a source's update lease: a read and a write. */
const MARK_LEASE_MS = 10_000;

/**
 * Saves `draft` marked as an update of `current`. Under a lease (`update:<source id>` under the run
 * lock) the record is read again and must be the one the request checked, not marked: of two
 * `PUT`s at once, one saves and the other gets 409 (the store's write is not conditional).
 */
async function markUpdate(deps: SourceDeps, current: SourceRecord, draft: SourceRecord): Promise<SourceRecord> {
  const now = deps.clock.nowMs();
  const lease = await deps.runLock.acquire(`update:${current.id}`, { leaseMs: MARK_LEASE_MS, waitUntilMs: now });
  if (!lease) throw conflict(`source ${current.id} is being updated by another request; try again`);
  try {
    const latest = await deps.sources.getSource(current.id);
    if (!latest) throw notFound("source");
    refuseWhileDeploying(latest);
    if (
      latest.updatedAt !== current.updatedAt ||
      JSON.stringify(settingsOf(latest)) !== JSON.stringify(settingsOf(current))
    ) {
      throw conflict(`source ${current.id} was changed by another request meanwhile; try again`);
    }
    return await deps.sources.updateSource({ ...draft, deployingSince: now, updateFrom: settingsOf(current) });
  } finally {
    await lease.release().catch(() => {});
  }
}

/** What {@link runUpdate} ended with: the record as saved, and the failure when one stopped it. */
interface UpdateOutcome {
  source: SourceRecord;
  failed: boolean;
  error?: unknown;
}

/**
 * The steps of an update (#core/component-model `UPDATE_STEPS`) from `from` on, on a record
 * marked by {@link markUpdate}; the finisher goes on with them without a budget (`budget`
 * undefined, and it writes each step it starts). A failure is never half done:
 *
 * - `deactivate()` failing: the previous settings stay in force. They are put back, with their
 *   timer; nothing else of the source had changed yet (its function is made after this step).
 * - a later step failing (the function, `activate()`): the previous settings' `deactivate()`
 *   already ran, so they cannot come back without running hooks again. The new settings stay,
 *   inactive and without their timer, with `deploy_error` saying why: an `activate()` that failed
 *   half way has nothing running against it, and `PUT` with `active: true` tries it again.
 *
 * A failure in a request is also thrown to its client (`failed`, `error`); one in the finisher is
 * only shown on the source (`deploy_state: "failed"`, which a successful `PUT` clears).
 */
async function runUpdate(
  deps: SourceDeps,
  marked: SourceRecord,
  from: DeployStep,
  budget: StepBudget | undefined,
): Promise<UpdateOutcome> {
  // The finisher (no budget, a step on the record) writes each step it starts, and a failure's reason.
  const inFinisher = budget === undefined && marked.deployStep !== undefined;
  let current = marked;
  let step: DeployStep = from;
  try {
    const component = await loadComponent(deps, current.componentId);
    if (!component) throw notFound("component");
    for (step of UPDATE_STEPS.slice(UPDATE_STEPS.indexOf(from as (typeof UPDATE_STEPS)[number]))) {
      // The previous settings' timer stops first, whether their `deactivate()` runs here or later.
      if (step === "deactivate" && current.updateFrom?.active) await deps.timers.cancel({ sourceId: current.id });
      const hooked = step === "prepare" ? undefined : await updateStepHook(deps, current, component, step);
      if (step !== "prepare" && hooked === undefined) continue;
      if (stepTiming(deps, budget, stepNeedsMs(deps, step)) === "later") {
        return { source: await deferDeploy(deps, current, step), failed: false };
      }
      if (inFinisher && current.deployStep !== step) {
        const deleting = await markedForDeletion(deps, current);
        if (deleting) return { source: deleting, failed: false };
        current = await deps.sources.updateSource({ ...current, deployStep: step });
      }
      if (step === "prepare") {
        if (!(await prepareWithin(deps, current, component, budget))) {
          return { source: await deferDeploy(deps, current, "prepare"), failed: false };
        }
      } else if (hooked) {
        await runHook(deps, hooked.source, hooked.component, step);
      }
    }
    const deleting = await markedForDeletion(deps, current);
    if (deleting) return { source: deleting, failed: false };
    if (current.active && current.timer) await deps.timers.schedule({ sourceId: current.id }, current.timer);
    current = await deps.sources.updateSource(unmarked(current));
    deps.log.info("source updated", sourceLogFields(current));
    return { source: current, failed: false };
  } catch (error) {
    const reason = inFinisher ? failureReason(deps, current, error) : undefined;
    const left = await failUpdate(deps, current, step, reason, error);
    return { source: left ?? current, failed: true, error };
  }
}

/**
 * The hook an update step runs, with the record and component it runs on (`deactivate`: the
 * previous settings, when they were active; `activate`: the new ones, when active), if the
 * component has it.
 */
async function updateStepHook(
  deps: SourceDeps,
  source: SourceRecord,
  component: ComponentRecord,
  step: DeployStep,
): Promise<{ source: SourceRecord; component: ComponentRecord } | undefined> {
  if (step === "activate")
    return source.active && component.metadata.hooks.includes("activate") ? { source, component } : undefined;
  if (step !== "deactivate" || !source.updateFrom?.active) return undefined;
  const previous = withSettings(source, source.updateFrom);
  const previousComponent =
    previous.componentId === component.id ? component : await loadComponent(deps, previous.componentId);
  if (!previousComponent?.metadata.hooks.includes("deactivate")) return undefined;
  return { source: previous, component: previousComponent };
}

/**
 * Leaves a failed update in one of the two states {@link runUpdate} names; `reason` (a failure in
 * the background) is shown as `deploy_error`. Returns the record as saved (none: it was deleted
 * meanwhile, a `DELETE` being allowed during an update).
 */
async function failUpdate(
  deps: SourceDeps,
  source: SourceRecord,
  step: DeployStep,
  reason: string | undefined,
  error: unknown,
): Promise<SourceRecord | undefined> {
  const previous = source.updateFrom;
  const current = await deps.sources.getSource(source.id);
  // Deleted meanwhile: its deletion removed its code, which this update's `prepare` may have made
  // again (a Lambda function on AWS; locally the host refuses a removed source's). It goes too.
  if (!current) await deps.host.remove({ sourceId: source.id, ownerId: source.workspaceId });
  if (!current || previous === undefined) return undefined;
  if (step === "deactivate") {
    const restored = withSettings(unmarked(current), previous);
    if (reason !== undefined) restored.deployError = `the update failed, the previous settings stay: ${reason}`;
    const saved = await deps.sources.updateSource(restored);
    if (saved.active && saved.timer) await deps.timers.schedule({ sourceId: saved.id }, saved.timer);
    return saved;
  }
  await deps.timers.cancel({ sourceId: source.id });
  const message = isDomainError(error) ? error.message : "an internal error";
  const stopped = { ...unmarked(current), active: false };
  stopped.deployError = `the update failed at ${step} (${reason ?? message}); the source is inactive with its new settings: update it with active: true to try again`;
  return deps.sources.updateSource(stopped);
}

/**
 * An update the sweep found unfinished past its bound: which hooks ran is unknown (the request
 * does not write its steps), and the sweep runs none (decision 334), so the new settings stay,
 * inactive and without a timer, with `deploy_error` saying so, as a failure after `deactivate()`
 * leaves them ({@link runUpdate}). Its function may still hold the previous code: an inactive
 * source runs nothing, and the next `PUT` makes it again (the sweeper may not build code).
 */
async function stopInterruptedUpdate(deps: SourceDeps, source: SourceRecord): Promise<void> {
  await deps.timers.cancel({ sourceId: source.id });
  const where = source.deployStep === undefined ? "in its request" : `at ${source.deployStep}`;
  await deps.sources.updateSource({
    ...unmarked(source),
    active: false,
    deployError: `the update was interrupted ${where}; the source is inactive with its new settings: update it with active: true to activate it`,
  });
}

/**
 * `DELETE /sources/{id}`: `deactivate()` (when active), then the source, its timer, its
 * subscriptions (as emitter and as listener), its auto subscriptions, code and events go.
 *
 * With `answerByMs` (AWS) and a deploy finisher, a `deactivate()` that cannot start with its whole
 * time limit left goes to the finisher ({@link deferDeletion}): the source is marked
 * (`deployStep: "delete"`, reads `deploy_state: "deleting"`) and stopped at once, and the request
 * answers as a finished deletion does. A `DELETE` of a source being deleted so answers the same
 * and does nothing; of one whose background `deactivate()` failed, removes it without the hook.
 */
export async function deleteSource(
  deps: SourceDeps,
  caller: Caller,
  id: string,
  options: { answerByMs?: number } = {},
) {
  const source = await requireSource(deps, caller, id);
  if (source.deployStep === "delete") {
    if (source.deployError !== undefined) {
      await removeSource(deps, source);
      deps.log.info("source deleted without its deactivate hook", sourceLogFields(source));
    }
    return { id: source.id, deleted: true };
  }
  const component = await loadComponent(deps, source.componentId);
  const hooked = source.active && component?.metadata.hooks.includes("deactivate") === true;
  if (hooked && stepTiming(deps, budgetOf(options), stepNeedsMs(deps, "deactivate")) === "later") {
    await deferDeletion(deps, source);
    return { id: source.id, deleted: true };
  }
  if (source.active && component) {
    try {
      await runHook(deps, source, component, "deactivate");
    } catch (error) {
      if (isDomainError(error) && error.code === "validation") await keepFailedDeletion(deps, source, error.message);
      throw error;
    }
  }
  await removeSource(deps, source);
  deps.log.info("source deleted", sourceLogFields(source));
  return { id: source.id, deleted: true };
}

/**
 * A deletion whose `deactivate()` failed in the request: the source is kept, stopped and marked as
 * a background deletion that failed is ({@link finishDeletion}), and the caller told that a `DELETE`
 * again removes it without the hook. Else a hook that always fails (or hangs) would keep it for
 * ever: no deletion, no update (an update runs the old settings' `deactivate()` first).
 */
async function keepFailedDeletion(deps: SourceDeps, source: SourceRecord, reason: string): Promise<never> {
  const again = "DELETE the source again to remove it without its deactivate hook";
  const current = await deps.sources.getSource(source.id);
  if (current) {
    await deps.sources.updateSource({
      ...unmarked(current),
      active: false,
      deployingSince: deps.clock.nowMs(),
      deployStep: "delete",
      deployError: `the deletion stopped: ${reason}; ${again.replace("DELETE", "delete")}`,
    });
    await deps.timers.cancel({ sourceId: source.id });
  }
  deps.log.warn("source deletion stopped: its deactivate hook failed", { ...sourceLogFields(source), reason });
  throw new DomainError("validation", `${reason}; ${again}`, [
    { field: "component_code", message: `${reason}; ${again}` },
  ]);
}

/**
 * A deletion whose `deactivate()` the request has no time for: the source is saved marked
 * (`deployingSince`, `deployStep: "delete"`) and inactive, so that from this write on nothing runs
 * it (its endpoint answers as an inactive source's, deliveries to it are dropped), then its timer
 * stops and the finisher is invoked ({@link finishDeletion}). An interruption leaves the mark, and
 * the recovery sweep removes the source without the hook, as an interrupted deploy. A hand-over
 * that fails removes it here, without the hook, as the sweep would.
 */
async function deferDeletion(deps: SourceDeps, source: SourceRecord): Promise<void> {
  const marked = await deps.sources.updateSource({
    ...unmarked(source),
    active: false,
    deployingSince: deps.clock.nowMs(),
    deployStep: "delete",
  });
  await deps.timers.cancel({ sourceId: source.id });
  try {
    await deps.deployFinisher?.finishLater(source.id);
  } catch (error) {
    deps.log.error("source deletion not handed over: removed without its deactivate hook", {
      ...sourceLogFields(source),
      error: String(error),
    });
    await removeSource(deps, marked);
    return;
  }
  deps.log.info("source deletion goes on in the background", sourceLogFields(source));
}

/**
 * The finisher's part of a deletion ({@link deferDeletion}): `deactivate()` with its whole time,
 * then everything of the source goes, as {@link deleteSource}. A `deactivate()` that fails keeps
 * the record, still marked and inactive, with the reason (`deploy_state: "failed"`): a `DELETE`
 * then removes it without the hook, and the sweep does so past its bound.
 */
async function finishDeletion(deps: SourceDeps, source: SourceRecord): Promise<FinishOutcome> {
  try {
    const component = await loadComponent(deps, source.componentId);
    if (component) await runHook(deps, source, component, "deactivate");
  } catch (error) {
    const reason = failureReason(deps, source, error);
    const current = await deps.sources.getSource(source.id);
    if (current) {
      await deps.sources.updateSource({
        ...current,
        deployError: `the deletion stopped: ${reason}; delete the source again to remove it without its deactivate hook`,
      });
    }
    return "failed";
  }
  await removeSource(deps, source);
  deps.log.info("source deleted", sourceLogFields(source));
  return "deleted";
}

async function removeSource(deps: SourceDeps, source: SourceRecord) {
  await removeSourceParts(deps, source);
  await deps.sources.deleteSource(source.id);
  await deps.events.deleteAllEvents(source.id);
  await forgetSubscriptionsOf(deps, source.id);
}

/** What a source has besides its record and events: timer, subscriptions, code, delayed emits. */
async function removeSourceParts(deps: SourceDeps, source: SourceRecord) {
  await deps.timers.cancel({ sourceId: source.id });
  // Subscriptions (as emitter or listener) go before the source, so a failure half way leaves the
  // source in place and repeating the deletion finishes the job.
  await forgetSubscriptionsOf(deps, source.id);
  // Its code (a Lambda function on AWS) too, while the record still names it for a repeat.
  await deps.host.remove({ sourceId: source.id, ownerId: source.workspaceId });
  await deps.delayedEmits?.removeRange(source.id);
}

/** `GET /sources/{id}`. */
export async function getSource(deps: SourceDeps, caller: Caller, id: string) {
  const source = await requireSource(deps, caller, id);
  const component = await loadComponent(deps, source.componentId);
  if (!component) throw notFound("component");
  return sourceView(deps, source, component);
}

/** `GET /users/me/sources`. */
export async function listUserSources(deps: SourceDeps, caller: Caller, page: PageQuery) {
  return presentPage(deps, await deps.sources.listSourcesOfUser(caller.userId, page), page);
}

/** `GET /orgs/{workspace_id}/sources`. */
export async function listWorkspaceSources(deps: SourceDeps, caller: Caller, workspaceId: string, page: PageQuery) {
  const workspace = await requireWorkspace(deps, caller, workspaceId);
  return presentPage(deps, await deps.sources.listSourcesOfWorkspace(workspace.id, page), page);
}

async function presentPage(deps: SourceDeps, page: { items: SourceRecord[]; totalCount: number }, query: PageQuery) {
  const components = new Map<string, ComponentRecord | undefined>();
  for (const source of page.items) {
    if (!components.has(source.componentId)) {
      components.set(source.componentId, await loadComponent(deps, source.componentId));
    }
  }
  return pageEnvelope(
    page,
    (source) => source.id,
    (source) => sourceView(deps, source, components.get(source.componentId)),
    query,
  );
}

/** The Source resource of the spec; secrets are never in it. */
export function sourceView(deps: Pick<Deps, "runtime">, source: SourceRecord, component?: ComponentRecord) {
  const definitions = component ? propsOf(source, component) : (source.propDefinitions ?? []);
  return {
    id: source.id,
    user_id: source.userId,
    // A workflow's trigger source is the workflow's (the spec's source trigger shape).
    owner_id: source.workflowId ?? source.workspaceId,
    component_id: source.componentId,
    configured_props: configuredPropsView(definitions, source.configuredProps, interfaceContext(deps, source)),
    active: source.active,
    created_at: epochSeconds(source.createdAt),
    updated_at: epochSeconds(source.updatedAt),
    name: source.name,
    name_slug: source.nameSlug,
    // Only while a deploy is in progress or failed; a deployed source has the spec's shape exactly.
    ...deployView(source),
  };
}

/** `deploy_state` and its companions (docs/components.md "Deploys in progress"). */
function deployView(source: SourceRecord) {
  // A failed create keeps its mark (the sweep removes it); a failed update does not (it stays).
  if (source.deployError !== undefined) return { deploy_state: "failed" as const, deploy_error: source.deployError };
  if (source.deployingSince === undefined) return {};
  if (source.deployStep === "delete") return { deploy_state: "deleting" as const };
  return {
    deploy_state: "deploying" as const,
    ...(source.deployStep === undefined ? {} : { deploy_step: source.deployStep }),
  };
}
