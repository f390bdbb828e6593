/**
 * Running one action on its own, outside any workflow: the Connect API's run action
 * (`POST /v1/connect/{project_id}/actions/run`, real-behaviour.md §1.9; docs/components.md
 * "Running an action"). The action's configured props are validated as a workflow step's are at
 * create (its `additionalProps` asked first), its accounts and data stores bound as at a run, and
 * it runs as a one-step workflow run in the sandbox (its own process pool per workspace and
 * component, as the dynamic props probes have; on AWS a function of its own). The answer is the
 * original's `{exports, os, ret}`: what the step exported and returned, its console lines and
 * error as observations. Nothing is stored: no run record, no events, no `$.service.db` state;
 * `$.send.*` and the pausing `$.flow` helpers throw (`WorkflowInvocation.standalone`). The run
 * counts toward the workspace's quotas and usage as a run does.
 */
import type { Deps } from "#core/ports/deps";
import { jsonBytesWithin } from "#runtime/json-value";
import type { ErrorRecord, Json, WorkflowInvocation, WorkflowResult } from "#runtime/protocol";
import { type WorkspaceChoice, workspaceOrDefault } from "./accounts.ts";
import { bindAccounts, MASK, maskCredentials, maskedError } from "./app-accounts.ts";
import { findComponent } from "./components.ts";
import { bindDataStoreProps, runServices } from "./data-stores.ts";
import { stepPropDefinitions } from "./dynamic-props.ts";
import { invalid } from "./errors.ts";
import type { Caller } from "./identity.ts";
import { probeIdOf } from "./ids.ts";
import { type Observation, observationsOf } from "./prop-options.ts";
import { runtimeProps } from "./props.ts";
import { creditsOf, runRefusal } from "./quotas.ts";
import { redactPaths } from "./redact-paths.ts";
import { resolveComponentProps } from "./resolve-props.ts";
import { trustedDuration } from "./run-limits.ts";
import { isoTime, usageDay } from "./time.ts";

/** The body of the run action (the original's `RunActionOpts`). */
export interface RunActionInput extends WorkspaceChoice {
  /** A saved action (`sc_`), the caller's component key, or a registry key. */
  id: string;
  configured_props?: Record<string, unknown> | undefined;
  /** The action's version: must be the one Sluice has under `id`, when given. */
  version?: string | null | undefined;
  /** Accepted for Connect clients: the prop set is recomputed from `configured_props`. */
  dynamic_props_id?: string | undefined;
  /** Accepted for Connect clients: Sluice's accounts have no external users. */
  external_user_id?: string | undefined;
  /** A File Stash: none is kept, so only an absent or empty one is accepted. */
  stash_id?: string | boolean | null | undefined;
}

/** The run action's answer (the original's `RunActionResponse`), and an `error` when it failed. */
export interface RunActionAnswer {
  /** What the action exported with `$.export` (`$summary` included). */
  exports: Record<string, Json>;
  /** Its console lines, then its error, as observations. */
  os: Observation[];
  /** What its `run` returned; absent when it returned nothing or failed. */
  ret?: Json;
  /** Why it failed: what it threw, its time limit, a quota. */
  error?: { name: string; message: string };
}

/** What the values of a run may take beyond the export limit: export names, the JSON around them. */
const VALUES_SLACK_BYTES = 1024 * 1024;

/** The namespace the action's step has (code sees it nowhere but in its own `steps`). */
const NAMESPACE = "action";

export async function runAction(
  deps: Deps,
  caller: Caller,
  input: RunActionInput,
  /** The project whose File Store its `$.files` reaches (the Connect route's). */
  projectId?: string,
): Promise<RunActionAnswer> {
  if (input.stash_id !== undefined && input.stash_id !== null && input.stash_id !== "" && input.stash_id !== false) {
    throw invalid(
      "stash_id",
      "File Stashes are not kept by Sluice: leave it out (the action's /tmp is its sandbox process's own)",
    );
  }
  const component = await findComponent(deps, caller, input.id);
  if (component.metadata.type !== "action") {
    throw invalid("id", "names a source, not an action: deploy a source with POST /v1/sources");
  }
  if (input.version !== undefined && input.version !== null && input.version !== component.version) {
    throw invalid("version", `is not the version Sluice has of this component (${component.version})`);
  }
  const workspace = await workspaceOrDefault(deps, caller, input);
  const workflowId = probeWorkflowId(workspace.id, component.id);
  const failure = (error: ErrorRecord, credentials: readonly string[] = []) => {
    const answer = failed(error, credentials);
    logFailure(deps, workspace.id, component.id, answer);
    return answer;
  };
  // Before any of its code runs (`additionalProps` included): a workspace over its quota runs nothing.
  const refusal = await runRefusal(deps, workspace.id);
  if (refusal) return failure({ name: "QuotaExceededError", message: refusal.message, ts: deps.clock.nowMs() });
  const { validated, definitions } = await resolveComponentProps(
    deps,
    workspace.id,
    component,
    input.configured_props,
    {
      fieldPrefix: "configured_props",
      askAdditionalProps: (first) =>
        stepPropDefinitions(deps, caller, workspace.id, component, first.values, "configured_props"),
    },
  );
  const defs = definitions ?? component.metadata.props;

  const timeoutMs = deps.runtime.invocationTimeoutMs;
  const { props, propTypes } = runtimeProps(defs, validated.values, {});
  const accounts = await bindAccounts(deps, workspace.id, defs, props, timeoutMs);
  if (accounts.error) return failure(accounts.error);
  const stores = new Set<string>();
  const stepId = probeIdOf("step", workflowId, "step");
  const now = deps.clock.nowMs();
  const invocation: WorkflowInvocation = {
    invocationId: deps.ids.newSecret(12),
    kind: "workflow",
    workflowId,
    trigger: { event: {} },
    context: {
      id: deps.ids.newId("run"),
      ts: isoTime(now),
      workflow_id: null,
      deployment_id: null,
      source_type: "CONNECT",
      verified: false,
      owner_id: caller.userId,
      platform_version: "sluice",
      JIT: false,
      run: { runs: 1, retry_count: 0 },
    },
    steps: [
      {
        id: stepId,
        namespace: NAMESPACE,
        module: component.codeHash,
        // Unset data_store props are bound to nothing: no store is made for a run nobody keeps.
        props: await bindDataStoreProps(deps, workspace.id, undefined, accounts.props, propTypes, stores),
        propTypes,
        db: {},
      },
    ],
    respondable: false,
    timeoutMs,
    limits: { ...deps.runtime.emitLimits, ...deps.runtime.workflowLimits },
    ...(deps.runtime.allowPrivateAddresses === true ? { allowPrivateAddresses: true } : {}),
    standalone: true,
  };
  const code = {
    workflowId,
    ownerId: workspace.id,
    deploymentId: probeIdOf("deployment", component.codeHash),
    steps: [{ codeHash: component.codeHash, code: component.code }],
  };
  await deps.host.prepareWorkflow(code);
  const handlers = runServices(
    deps,
    invocation,
    stores,
    projectId === undefined ? undefined : { projectId, components: [component] },
  );
  const started = deps.clock.nowMs();
  const result = await deps.host.invokeWorkflow(code, invocation, handlers);
  const elapsedMs = deps.clock.nowMs() - started;
  const computeTimeMs = trustedDuration(result.durationMs, elapsedMs, timeoutMs);
  await deps.usage.addUsage(workspace.id, usageDay(deps.clock.nowMs()), {
    invocations: 1,
    computeTimeMs,
    credits: creditsOf(computeTimeMs),
  });
  const answer = answerOf(result, accounts.credentials, deps.runtime.workflowLimits.maxExportBytes);
  logFailure(deps, workspace.id, component.id, answer);
  return answer;
}

/** The operator's line for a run that failed (docs/operations.md), whatever failed it. */
function logFailure(deps: Pick<Deps, "log">, workspaceId: string, componentId: string, answer: RunActionAnswer): void {
  if (!answer.error) return;
  deps.log.warn("action run failed", {
    workspace_id: workspaceId,
    component_id: componentId,
    error: answer.error.name,
  });
}

/**
 * The id an action's runs in one workspace run under: a workflow id of time 0 (no real workflow
 * has it) derived from both, so successive runs reuse a warm sandbox process while two workspaces
 * never share one.
 */
export function probeWorkflowId(workspaceId: string, componentId: string): string {
  return probeIdOf("workflow", "run action", workspaceId, componentId);
}

/** The answer of a run that did not start. */
function failed(error: ErrorRecord, credentials: readonly string[]): RunActionAnswer {
  const masked = maskedError(error, credentials);
  return { exports: {}, os: observationsOf([], masked), error: { name: masked.name, message: masked.message } };
}

/** The answer from the run's result: its step's values, logs and error, credentials masked throughout. */
function answerOf(result: WorkflowResult, credentials: readonly string[], maxBytes: number): RunActionAnswer {
  const [step] = result.steps;
  const values = result.values?.[NAMESPACE];
  // The runtime keeps exports and the return value within the limit (their names and the JSON
  // around them aside): a result far past it was not its own.
  const bound = maxBytes + VALUES_SLACK_BYTES;
  const over = values !== undefined && jsonBytesWithin(values, bound) > bound;
  const error: ErrorRecord | undefined = over
    ? {
        name: "ExportLimitError",
        message: `the action's exports and return value, with their names, are over ${bound} bytes of JSON (the export limit is ${maxBytes} bytes of values, names aside)`,
        ts: Date.now(),
      }
    : (step?.error ?? result.error);
  const logs = result.logs.map((log) => ({ ...log, message: maskCredentials(log.message, credentials) }));
  const masked = error ? maskedError({ ...error, message: redactPaths(error.message) }, credentials) : undefined;
  const own = over ? undefined : maskValues(values, credentials);
  const exports: Record<string, Json> = {};
  let ret: Json | undefined;
  if (typeof own === "object" && own !== null && !Array.isArray(own)) {
    for (const [name, value] of Object.entries(own)) {
      if (name === "$return_value") ret = value;
      else Object.defineProperty(exports, name, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  const answer: RunActionAnswer = { exports, os: observationsOf(logs, masked) };
  if (ret !== undefined && !masked) answer.ret = ret;
  if (masked) answer.error = { name: masked.name, message: masked.message };
  return answer;
}

/**
 * `value` with its credentials masked as in logs ({@link maskCredentials}, longest first): inside
 * strings and keys; a number whose text holds one becomes the mask (a digits-only password can be
 * an order number's digits). Walked, never replaced in serialised JSON, whose text a masked
 * number would break.
 */
function maskValues(value: Json | undefined, credentials: readonly string[]): Json | undefined {
  if (value === undefined || credentials.length === 0) return value;
  const mask = (item: Json): Json => {
    if (typeof item === "string") return maskCredentials(item, credentials);
    if (typeof item === "number") {
      const text = String(item);
      return maskCredentials(text, credentials) === text ? item : MASK;
    }
    if (Array.isArray(item)) return item.map(mask);
    if (item === null || typeof item !== "object") return item;
    const out: Record<string, Json> = {};
    for (const [key, inner] of Object.entries(item)) {
      const name = maskCredentials(key, credentials);
      Object.defineProperty(out, name, { value: mask(inner), enumerable: true, writable: true, configurable: true });
    }
    return out;
  };
  return mask(value);
}
